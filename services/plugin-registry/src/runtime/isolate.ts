/**
 * A child process that runs untrusted code (a plugin's entry module, a surface template), ADR 0007: its
 * own V8 heap capped with `--max-old-space-size`, an empty environment, no output of its own, messages over
 * the IPC channel. A worker thread would be cheaper, but a single runaway allocation in a worker (one array
 * grown past the heap limit) aborts the whole process; a child process takes only itself down.
 *
 * Node's permission model confines it (`--permission`, stable since Node 23.5): it reads only its own
 * worker's folder, the installed packages it imports (the `node_modules` that holds them) and the folders
 * it is given (the unpacked plugins); it writes nothing, starts no process, worker thread or addon. So a
 * plugin or a template cannot read the host's secrets (`/proc/<registry pid>/environ`, the service's files)
 * nor run anything else.
 */
import { type ChildProcess, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, sep } from "node:path";
import { fileURLToPath } from "node:url";

import { BUILD_INFO } from "@svc/runtime";

export interface Isolate {
  readonly pid: number | undefined;
  send(message: unknown): void;
  onMessage(listener: (message: unknown) => void): void;
  offMessage(listener: (message: unknown) => void): void;
  /** Called once when the process is gone: its exit code, or the signal that ended it. */
  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
  readonly exited: boolean;
  /** The process's resident memory in bytes, read from /proc (undefined where there is none). */
  residentBytes(): number | undefined;
  /** Ends the process at once (SIGKILL); resolves when it is gone. */
  kill(): Promise<void>;
}

/** Linux's page size on the platforms the image ships for (x86-64, arm64 with 4 KiB pages). */
const PAGE_BYTES = 4_096;

/** The module a confined process runs, and the packages it imports from node_modules (readable to it). */
export interface IsolateWorker {
  readonly url: URL;
  readonly imports: readonly string[];
}

/**
 * A worker the build bundles with the packages it imports (scripts/build.mjs): a built registry's processes
 * running it are granted no `node_modules` folder; run from the sources, it imports `imports` from there.
 */
export function bundledWorker(url: URL, imports: readonly string[]): IsolateWorker {
  return { url, imports: BUILD_INFO.builtAt === null ? imports : [] };
}

/** What a confined process may read besides its worker's folder. */
export interface IsolateAccess {
  /** Packages the worker imports: the `node_modules` folder each resolves into becomes readable. */
  readonly imports: readonly string[];
  /** Further folders it reads (the unpacked plugins). */
  readonly readable: readonly string[];
}

/** The `node_modules` folder a package resolves into, from this module's place (the registry's own). */
function nodeModulesOf(specifier: string): string {
  const resolved = fileURLToPath(import.meta.resolve(specifier));
  const marker = `${sep}node_modules${sep}`;
  const at = resolved.lastIndexOf(marker);
  if (at < 0) throw new Error(`${specifier} does not resolve into a node_modules folder (${resolved})`);
  return resolved.slice(0, at + marker.length - 1);
}

/** Stable as `--permission` since Node 23.5 (the project's Node is 24); experimental before. */
const PERMISSION_FLAG =
  Number(process.versions.node.split(".")[0]) >= 24 ? "--permission" : "--experimental-permission";

/** The permission model's flags: read what `access` names, nothing else; no writes, processes or addons. */
export function permissionFlags(file: URL, access: IsolateAccess): string[] {
  const readable = new Set([
    dirname(fileURLToPath(file)),
    ...access.imports.map(nodeModulesOf),
    // Everything below: the folder may not exist yet when a spare process starts (a path that did not
    // exist at start would be granted as a file only).
    ...access.readable.map((dir) => `${dir}${sep}*`),
  ]);
  return [PERMISSION_FLAG, ...[...readable].map((dir) => `--allow-fs-read=${dir}`)];
}

export function startIsolate(
  file: URL,
  data: unknown,
  memoryLimitMb: number,
  access: IsolateAccess,
): Isolate {
  const child: ChildProcess = fork(fileURLToPath(file), [JSON.stringify(data)], {
    // Plain Node with a heap limit: no loader of the parent (tsx, test runners) and no inspector.
    execArgv: [
      `--max-old-space-size=${memoryLimitMb}`,
      `--max-semi-space-size=${Math.max(1, Math.floor(memoryLimitMb / 16))}`,
      ...permissionFlags(file, access),
    ],
    env: {},
    stdio: ["ignore", "ignore", "ignore", "ipc"],
    serialization: "advanced",
  });
  // An isolate keeps no service process alive on its own.
  child.unref();
  child.channel?.unref();
  let exited = false;
  const gone = new Promise<void>((resolve) => {
    child.once("exit", () => {
      exited = true;
      resolve();
    });
  });
  child.on("error", () => undefined);
  return {
    get pid() {
      return child.pid;
    },
    get exited() {
      return exited;
    },
    send(message) {
      if (!exited && child.connected) child.send(message as never, (error) => void error);
    },
    onMessage(listener) {
      child.on("message", listener);
    },
    offMessage(listener) {
      child.off("message", listener);
    },
    residentBytes() {
      if (exited || child.pid === undefined) return undefined;
      try {
        // statm: size resident shared … in pages.
        const resident = Number(readFileSync(`/proc/${child.pid}/statm`, "utf8").split(" ")[1]);
        return Number.isFinite(resident) ? resident * PAGE_BYTES : undefined;
      } catch {
        return undefined;
      }
    },
    onExit(listener) {
      child.once("exit", listener);
    },
    async kill() {
      if (!exited) child.kill("SIGKILL");
      await gone;
    },
  };
}
