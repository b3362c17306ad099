/**
 * A PostgreSQL server of a test's own (initdb and pg_ctl from the machine's PostgreSQL, its own data
 * directory, port and socket folder, trust authentication on 127.0.0.1), for tests that stop, crash and
 * restart the database: the machine's shared server is never touched. As root (this kind of machine, CI)
 * the server runs as the `postgres` user, which PostgreSQL requires.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { freePort } from "../../scripts/lib/stack.js";

/** The bin folder of the newest PostgreSQL installed from Debian's packages, or none. */
export function postgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "pg_ctl")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], "bin");
}

export class OwnPostgres {
  private dir = "";
  private port = 0;
  private readonly bin: string;
  private readonly asRoot = process.getuid?.() === 0;

  constructor() {
    const bin = postgresBin();
    if (bin === undefined) throw new Error("no PostgreSQL installation under /usr/lib/postgresql");
    this.bin = bin;
  }

  private run(tool: string, args: string[]): string {
    const command = join(this.bin, tool);
    const [file, all] = this.asRoot
      ? ["runuser", ["-u", "postgres", "--", command, ...args]]
      : [command, args];
    return execFileSync(file, all, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  }

  get data(): string {
    return join(this.dir, "data");
  }

  /** Makes the cluster and starts it; `url()` then reaches it. */
  async start(): Promise<void> {
    this.dir = mkdtempSync(join(tmpdir(), "svc-own-pg-"));
    if (this.asRoot) chownSync(this.dir, ...postgresIds());
    this.port = await freePort();
    this.run("initdb", ["-D", this.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
    await this.up();
  }

  /** A connection string for database `name` on this server. */
  url(name = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${name}`;
  }

  /**
   * Stops the server. `immediate` is a crash as far as clients see it (no checkpoint, every connection cut
   * at once, recovery from the WAL at the next start), what a failover looks like to the old primary's
   * clients; `fast` is an orderly shutdown that still cuts every connection.
   */
  stop(mode: "immediate" | "fast" = "immediate"): void {
    this.run("pg_ctl", ["-D", this.data, "-m", mode, "-w", "stop"]);
  }

  /** The postmaster's process id and those of its children (the server's processes). */
  private processes(): { postmaster: number; children: number[] } {
    const postmaster = Number(readFileSync(join(this.data, "postmaster.pid"), "utf8").split("\n")[0]);
    const children = execFileSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" })
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map(Number);
    return { postmaster, children };
  }

  /**
   * Freezes the WAL writer (SIGSTOP): WAL that no commit flushes itself (an asynchronous commit's) then
   * stays in shared memory, where a crash (`kill`) loses it. A synchronous commit still writes its own.
   */
  pauseWalWriter(): void {
    const { children } = this.processes();
    const walWriter = children.find((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("walwriter"),
    );
    if (walWriter === undefined) throw new Error("no walwriter process");
    process.kill(walWriter, "SIGSTOP");
  }

  /**
   * A crash: SIGKILL to the postmaster and every child at once. Shared memory, and WAL not yet written
   * out of it, is lost; the next `up()` recovers from the WAL on disk.
   */
  kill(): void {
    const { postmaster, children } = this.processes();
    const all = [postmaster, ...children];
    for (const pid of all) process.kill(pid, "SIGKILL");
    // Gone (and reaped) before the next start, which refuses while the old postmaster's process exists.
    const end = Date.now() + 10_000;
    while (all.some(alive)) {
      if (Date.now() > end) throw new Error("the killed server's processes are still there");
      execFileSync("sleep", ["0.05"]);
    }
  }

  /** Starts it again on the same port and data (a new primary behind the same name). */
  async up(): Promise<void> {
    this.run("pg_ctl", [
      "-D",
      this.data,
      "-w",
      "-l",
      join(this.dir, "server.log"),
      "-o",
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
      "start",
    ]);
  }

  async dispose(): Promise<void> {
    if (this.dir === "") return;
    try {
      this.stop("immediate");
    } catch {
      // not running (a test stopped it, or it never started)
    }
    rmSync(this.dir, { recursive: true, force: true });
    this.dir = "";
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function postgresIds(): [number, number] {
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return [uid, gid];
}
