import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { jetstreamManager, StorageType } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

import { tcpReachable } from "../../scripts/lib/stack.js";
import { until } from "./wait.js";

interface Node {
  readonly name: string;
  readonly clientPort: number;
  readonly routePort: number;
  readonly dir: string;
  process?: ChildProcess;
}

/**
 * A free port below the kernel's ephemeral range. A port the kernel handed out for a moment (`freePort`)
 * can be handed out again as the source port of an outgoing connection before the node binds it: the
 * nodes' own route connections, made while the others start, took one now and then, and that node never
 * started.
 */
async function quietPort(taken: Set<number>): Promise<number> {
  const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
    .trim()
    .split(/\s+/)
    .map(Number);
  const top = Math.min(low ?? 32_768, 32_768);
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * (top - 20_000));
    if (taken.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (free) {
      taken.add(port);
      return port;
    }
  }
}

/**
 * A three-node NATS cluster of a test's own (JetStream on every node, routes between them, each node its
 * own store and ports), which the test can kill -9 node by node, start again (with its store, or with an
 * empty one) and restart whole. The shared server is never touched.
 */
export class NatsCluster {
  private readonly root = mkdtempSync(join(tmpdir(), "svc-nats-cluster-"));
  private nodes: Node[] = [];

  /** The client URLs of every node, comma-separated: what NATS_URL takes. */
  get url(): string {
    return this.nodes.map((n) => `nats://127.0.0.1:${n.clientPort}`).join(",");
  }

  get names(): string[] {
    return this.nodes.map((n) => n.name);
  }

  async start(size = 3): Promise<void> {
    const ports = [];
    const taken = new Set<number>();
    for (let i = 0; i < size; i++)
      ports.push({ client: await quietPort(taken), route: await quietPort(taken) });
    this.nodes = ports.map((p, i) => ({
      name: `n${i + 1}`,
      clientPort: p.client,
      routePort: p.route,
      dir: join(this.root, `n${i + 1}`),
    }));
    await Promise.all(this.nodes.map((n) => this.launch(n)));
    await this.waitForJetStream();
  }

  private async launch(node: Node): Promise<void> {
    mkdirSync(node.dir, { recursive: true });
    const routes = this.nodes
      .filter((n) => n !== node)
      .map((n) => `nats-route://127.0.0.1:${n.routePort}`)
      .join(", ");
    const config = [
      `server_name: ${node.name}`,
      `listen: 127.0.0.1:${node.clientPort}`,
      `jetstream { store_dir: "${join(node.dir, "store")}", max_memory_store: 256MB, max_file_store: 2GB }`,
      `cluster { name: svc-test, listen: 127.0.0.1:${node.routePort}, routes: [${routes}] }`,
    ].join("\n");
    const file = join(node.dir, "nats.conf");
    writeFileSync(file, config);
    const log = join(node.dir, "nats.log");
    const child = spawn("nats-server", ["-c", file, "-l", log], { stdio: "ignore" });
    node.process = child;
    await until(
      async () => {
        if (child.exitCode !== null) {
          const tail = existsSync(log)
            ? readFileSync(log, "utf8").trim().split("\n").slice(-3).join(" | ")
            : "";
          throw new Error(`nats-server ${node.name} exited (${child.exitCode}) while starting: ${tail}`);
        }
        return tcpReachable("127.0.0.1", node.clientPort);
      },
      10_000,
      50,
    );
  }

  /**
   * Until the cluster's JetStream has a metadata leader: a stream can be made and deleted (what creating a
   * consumer, e.g. a bucket's watch, needs too).
   */
  async waitForJetStream(timeoutMs = 30_000): Promise<void> {
    const nc = await connect({ servers: this.url.split(","), reconnect: false });
    const probe = `probe_${Math.random().toString(36).slice(2, 10)}`;
    try {
      await until(
        async () => {
          try {
            const jsm = await jetstreamManager(nc, { timeout: 2_000 });
            await jsm.streams.add({ name: probe, subjects: [`${probe}.x`], storage: StorageType.Memory });
            await jsm.streams.delete(probe);
            return true;
          } catch {
            return false;
          }
        },
        timeoutMs,
        200,
      );
    } finally {
      await nc.close();
    }
  }

  /** kill -9 one node, and wait until it is gone. */
  async kill(name: string): Promise<void> {
    const node = this.node(name);
    const p = node.process;
    if (p === undefined || p.exitCode !== null) return;
    const gone = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await gone;
  }

  /** Starts a killed node again: with its store, or (`emptyStore`) as a replacement machine would. */
  async revive(name: string, options: { emptyStore?: boolean } = {}): Promise<void> {
    const node = this.node(name);
    if (options.emptyStore === true) rmSync(join(node.dir, "store"), { recursive: true, force: true });
    await this.launch(node);
  }

  private node(name: string): Node {
    const node = this.nodes.find((n) => n.name === name);
    if (node === undefined) throw new Error(`no node ${name}`);
    return node;
  }

  async dispose(): Promise<void> {
    for (const n of this.nodes) await this.kill(n.name);
    if (process.env.SVC_KEEP_CLUSTER === undefined) rmSync(this.root, { recursive: true, force: true });
  }
}
