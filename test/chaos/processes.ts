/**
 * The chaos harness's processes: the six services as esbuild bundles (built into the run's temporary
 * directory, never the shared dist/), and its own nats-server. Every process runs in its own process
 * group (a terminal's Ctrl-C reaches only the harness, which stops things in order) and logs to a file.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { closeSync, copyFileSync, cpSync, openSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";

import { build } from "esbuild";

import { repoRoot, type ServiceDir, SERVICES } from "../../scripts/lib/stack.js";

export { freePort } from "../../scripts/lib/stack.js";

/**
 * Bundles each service's entry as scripts/build.mjs does (npm dependencies external), into `dir`, and links
 * the repository's node_modules there so that the bundles resolve their external packages.
 */
export async function bundleServices(dir: string): Promise<Record<ServiceDir, string>> {
  const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
  const external = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {})];
  symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"), "dir");
  const out = Object.fromEntries(SERVICES.map((name) => [name, join(dir, `${name}.mjs`)])) as Record<
    ServiceDir,
    string
  >;
  await Promise.all(
    SERVICES.map((name) =>
      build({
        absWorkingDir: repoRoot,
        entryPoints: [join("services", name, "src", "main.ts")],
        outfile: out[name],
        bundle: true,
        platform: "node",
        target: "node24",
        format: "esm",
        sourcemap: true,
        external,
        logLevel: "warning",
      }),
    ),
  );
  // What scripts/build.mjs puts next to the bundles: the plugin and render workers (loaded by URL) and the
  // gateway's static shells.
  for (const worker of ["plugin-worker.mjs", "render-worker.mjs", "template-sandbox.mjs"])
    copyFileSync(join(repoRoot, "services", "plugin-registry", "src", "runtime", worker), join(dir, worker));
  cpSync(join(repoRoot, "services", "gateway", "static"), join(dir, "static"), { recursive: true });
  return out;
}

/** The nats-server binary: on PATH, else the usual places (as scripts/dev.ts looks for it). */
export function findNatsServer(): string {
  for (const candidate of ["nats-server", "/usr/sbin/nats-server", "/usr/local/bin/nats-server"]) {
    try {
      execFileSync(candidate, ["--version"], { stdio: "ignore" });
      return candidate;
    } catch {
      // try the next one
    }
  }
  throw new Error("nats-server is not installed (Debian: apt-get install -y nats-server)");
}

export interface ExitRecord {
  readonly at: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** True when the harness asked for it (a kill -9 of a phase, or the final stop). */
  readonly expected: boolean;
}

interface Spawned {
  readonly child: ChildProcess;
  expected: boolean;
  readonly exited: Promise<void>;
}

/** One supervised process: started, killed and restarted by the harness; every exit is recorded. */
export class ManagedProcess {
  readonly exits: ExitRecord[] = [];
  starts = 0;
  private current: Spawned | undefined;

  constructor(
    readonly name: string,
    private readonly command: string,
    private readonly args: readonly string[],
    private readonly env: NodeJS.ProcessEnv,
    readonly logFile: string,
    /** Called when the process exits without the harness asking (the harness restarts it). */
    private readonly onUnexpectedExit: (p: ManagedProcess, exit: ExitRecord) => void = () => undefined,
  ) {}

  get pid(): number | undefined {
    return this.current?.child.pid;
  }

  get running(): boolean {
    return this.current !== undefined;
  }

  start(): void {
    if (this.current !== undefined) throw new Error(`${this.name} is running already`);
    const fd = openSync(this.logFile, "a");
    let child: ChildProcess;
    try {
      child = spawn(this.command, [...this.args], {
        cwd: repoRoot,
        env: this.env,
        stdio: ["ignore", fd, fd],
        detached: true,
      });
    } finally {
      closeSync(fd);
    }
    this.starts++;
    let resolveExit: () => void = () => undefined;
    const spawned: Spawned = {
      child,
      expected: false,
      exited: new Promise<void>((resolve) => {
        resolveExit = resolve;
      }),
    };
    this.current = spawned;
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      const record: ExitRecord = { at: Date.now(), code, signal, expected: spawned.expected };
      this.exits.push(record);
      if (this.current === spawned) this.current = undefined;
      resolveExit();
      if (!record.expected) this.onUnexpectedExit(this, record);
    };
    child.once("exit", onExit);
    child.once("error", () => {
      // spawn failed: no exit event follows
      if (child.pid === undefined) onExit(null, null);
    });
  }

  /** kill -9, as an OOM kill or a node failure would; resolves when the process is gone. */
  async kill9(): Promise<void> {
    const s = this.current;
    if (s === undefined) return;
    s.expected = true;
    s.child.kill("SIGKILL");
    await s.exited;
  }

  /** SIGTERM (graceful drain), then SIGKILL after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    const s = this.current;
    if (s === undefined) return;
    s.expected = true;
    s.child.kill(graceMs > 0 ? "SIGTERM" : "SIGKILL");
    const timer = setTimeout(() => s.child.kill("SIGKILL"), graceMs);
    await s.exited;
    clearTimeout(timer);
  }

  /** Synchronous last resort (process exit handler): SIGKILL whatever still runs. */
  killNow(): void {
    const s = this.current;
    if (s === undefined) return;
    s.expected = true;
    try {
      s.child.kill("SIGKILL");
    } catch {
      // gone already
    }
  }
}
