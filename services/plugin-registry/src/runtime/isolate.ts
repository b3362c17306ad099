/**
 * A child process that runs untrusted code (a plugin's entry module, a surface template), ADR 0007: its
 * own V8 heap capped with `--max-old-space-size`, an empty environment, no output of its own, messages over
 * the IPC channel. A worker thread would be cheaper, but a single runaway allocation in a worker (one array
 * grown past the heap limit) aborts the whole process on Node 20; a child process takes only itself down.
 */
import { type ChildProcess, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

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

export function startIsolate(file: URL, data: unknown, memoryLimitMb: number): Isolate {
  const child: ChildProcess = fork(fileURLToPath(file), [JSON.stringify(data)], {
    // Plain Node with a heap limit: no loader of the parent (tsx, test runners) and no inspector.
    execArgv: [
      `--max-old-space-size=${memoryLimitMb}`,
      `--max-semi-space-size=${Math.max(1, Math.floor(memoryLimitMb / 16))}`,
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
