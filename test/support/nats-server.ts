import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { freePort, tcpReachable } from "../../scripts/lib/stack.js";
import { until } from "./wait.js";

/**
 * A nats-server of a test's own, on a free port, that the test can kill and start again (each start with
 * an empty store: the worst case of a restart). The shared server is never touched.
 */
export class OwnNatsServer {
  private process: ChildProcess | undefined;
  private readonly stores: string[] = [];
  port = 0;
  /** The server's log of its latest start (permission violations are logged there). */
  logFile = "";

  /** The log's lines so far. */
  log(): string[] {
    try {
      return readFileSync(this.logFile, "utf8").split("\n");
    } catch {
      return [];
    }
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** `config`: a nats-server configuration (authorization, tls, …) to start with. */
  async start(config?: string): Promise<void> {
    if (this.port === 0) this.port = await freePort();
    const store = mkdtempSync(join(tmpdir(), "svc-own-nats-"));
    this.stores.push(store);
    this.logFile = join(store, "nats.log");
    const args = ["-js", "-a", "127.0.0.1", "-p", String(this.port), "-sd", store, "-l", this.logFile];
    if (config !== undefined) {
      const file = join(store, "nats.conf");
      writeFileSync(file, config);
      args.unshift("-c", file);
    }
    this.process = spawn("nats-server", args, { stdio: "ignore" });
    await until(() => tcpReachable("127.0.0.1", this.port), 10_000, 50);
  }

  /** SIGSTOP: the server keeps its connections but answers nothing (a hung server); `resume` undoes it. */
  pause(): void {
    this.process?.kill("SIGSTOP");
  }

  resume(): void {
    this.process?.kill("SIGCONT");
  }

  /** kill -9, and wait until it is gone. */
  async kill(): Promise<void> {
    const p = this.process;
    if (p === undefined || p.exitCode !== null) return;
    const gone = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await gone;
  }

  async dispose(): Promise<void> {
    await this.kill();
    for (const dir of this.stores) rmSync(dir, { recursive: true, force: true });
  }
}
