/**
 * One active plugin in its own process (ADR 0007; isolate.ts): started from a verified package, with a heap
 * limit; watched by a heartbeat. Whatever the plugin does (throws, loops, exhausts its heap, calls
 * `process.exit`), the service goes on; the process is ended and `onFailure` says why, once. Processes
 * come from a pool that keeps spares started (two by default, BackendHost__PluginSpareProcesses; the NATS
 * client loaded and connected), so an activation does not wait for a process to boot.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { linkSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";

import type { NatsAuth } from "@svc/bus";
import { type Logger, storedContext, withContext } from "@svc/observability";

import { bundledWorker, type Isolate, type IsolateWorker, startIsolate } from "./isolate.js";
import { recordProcessSpan, traceparentOnly } from "./process-span.js";

export interface PublishedByPlugin {
  readonly eventName: string;
  readonly workspaceKey: string | null;
  readonly payload: unknown;
}

export interface WorkerHostOptions {
  readonly pluginId: string;
  readonly version: string;
  readonly root: string;
  readonly entryFile: string;
  readonly entryTypeName: string;
  /** A worker that does not answer a heartbeat for this long is stuck (a busy loop): it is ended. */
  readonly hangTimeoutMs: number;
  /** The worker's heap limit, to tell a worker stalled by garbage collection near it from a busy loop. */
  readonly memoryLimitMb: number;
  /** Longest the start (module load and `activate`) may take. */
  readonly startTimeoutMs: number;
  /** The worker serves this subject itself, with its own connection (its pool's NATS servers). */
  readonly serve?: { readonly subject: string; readonly queue: string };
  /** The plugin's own NATS credentials, when its pool's processes get theirs at load (per-plugin). */
  readonly nats?: { readonly auth: WorkerNatsAuth; readonly inboxPrefix: string };
  readonly log: Logger;
  readonly publish: (event: PublishedByPlugin) => Promise<void>;
  readonly onFailure: (reason: string) => void;
}

type WorkerMessage =
  | { type: "idle" }
  | { type: "ready"; handlers: string[] }
  | { type: "failed"; error: { message: string; name?: string; location?: string } }
  | { type: "pong"; id: number }
  | { type: "publish"; id: number; event: PublishedByPlugin; traceparent?: string }
  | {
      type: "span";
      traceparent: string;
      handler: string;
      started: number;
      ended: number;
      outcome: "ok" | "failed" | "timeout";
    }
  | { type: "log"; level: "debug" | "info" | "warn" | "error"; message: string; data: unknown }
  | { type: "crashed"; error: { message: string } }
  | { type: "stopped" };

/** The worker beside this module, bundled with its NATS client. */
const WORKER: IsolateWorker = bundledWorker(new URL("./plugin-worker.mjs", import.meta.url), [
  "@nats-io/transport-node",
]);

/** A started process and the folder it may read (its slot), where its plugin's files are put at load. */
export interface PluginProcess {
  readonly isolate: Isolate;
  readonly slot: string;
}

/**
 * Puts a package's files into a slot as hard links (the slots are beside the cache, on its file system, so
 * nothing is copied). Directories are made; anything else (links) is left out: packages hold plain files
 * only.
 */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true, mode: 0o700 });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) linkTree(source, target);
    else if (entry.isFile()) linkSync(source, target);
  }
}

/**
 * What a plugin process authenticates to NATS with: the contents of credentials and TLS files (the
 * process cannot read them itself), sent over IPC, never in its arguments. Never the registry's own
 * credentials: the plugin's minted ones, or the plugin user's (plugin-credentials.ts).
 */
export interface WorkerNatsAuth {
  /**
   * The user's nkey (a minted plugin user, or the plugins user of static auth): its public key and its
   * private key as PKCS #8 PEM; the process signs the server's nonce with node:crypto.
   */
  readonly key?: { readonly publicKey: string; readonly privateKeyPem: string };
  /** The minted user's JWT (with `key`; none for the plugins user of static auth). */
  readonly jwt?: string;
  readonly tls?: {
    readonly ca?: string;
    readonly cert?: string;
    readonly key?: string;
    readonly servername?: string;
  };
}

/**
 * The TLS a plugin process uses: the service's CA its server must chain to and the name it must carry,
 * and the plugins' own client certificate when one is given. Never the service's client certificate: that
 * is the service's identity, not the plugin's.
 */
export function workerTls(
  auth: NatsAuth,
  client: { readonly certFile: string | null; readonly keyFile: string | null },
): WorkerNatsAuth["tls"] | undefined {
  const t = auth.tls;
  if (!t || !(t.caFile || t.certFile || t.keyFile || t.serverName)) return undefined;
  return {
    ...(t.caFile ? { ca: readFileSync(t.caFile, "utf8") } : {}),
    ...(t.serverName ? { servername: t.serverName } : {}),
    ...(client.certFile && client.keyFile
      ? { cert: readFileSync(client.certFile, "utf8"), key: readFileSync(client.keyFile, "utf8") }
      : {}),
  };
}

/** How a pool's processes authenticate: all alike (none, or the shared plugin user), or each its own. */
export type PoolNatsAuth =
  | { readonly kind: "none"; readonly tls?: WorkerNatsAuth["tls"] }
  | { readonly kind: "shared"; readonly auth: WorkerNatsAuth; readonly inboxPrefix: string }
  | { readonly kind: "per-plugin" };

export interface WorkerPoolOptions {
  /** Each process's heap limit. */
  readonly memoryLimitMb: number;
  /** NATS server URL(s) the processes connect to; none: processes that serve no subject (tests). */
  readonly natsServers: readonly string[] | null;
  /** Where each process's slot is made (beside the plugin cache, on the same file system). */
  readonly slotsDir: string;
  /** Processes kept started and waiting for a plugin (default 2). */
  readonly spares?: number;
  /** How the processes authenticate to NATS (default: not at all, an open server). */
  readonly natsAuth?: PoolNatsAuth;
  /** The worker the processes run: the one beside this module unless a test names another. */
  readonly worker?: IsolateWorker;
}

/**
 * Starts plugin processes with the same limits and keeps `spares` started in advance. Each process may
 * read only its own slot, a folder under `slotsDir` (isolate.ts confines it); the plugin it serves is
 * linked into that slot when it is loaded, so a plugin reads its own files and no other plugin's.
 */
export class WorkerPool {
  private readonly ready: PluginProcess[] = [];
  private closed = false;

  private readonly memoryLimitMb: number;
  private readonly natsServers: readonly string[] | null;
  private readonly slotsDir: string;
  private readonly spares: number;
  private readonly natsAuth: PoolNatsAuth;
  private readonly worker: IsolateWorker;

  constructor(options: WorkerPoolOptions) {
    this.memoryLimitMb = options.memoryLimitMb;
    this.natsServers = options.natsServers;
    this.slotsDir = options.slotsDir;
    this.spares = options.spares ?? 2;
    this.natsAuth = options.natsAuth ?? { kind: "none" };
    this.worker = options.worker ?? WORKER;
  }

  /** The processes started and waiting for a plugin (their ids; a process that ended is not counted). */
  spareProcesses(): Array<number | undefined> {
    return this.ready.filter((p) => !p.isolate.exited).map((p) => p.isolate.pid);
  }

  /** A started process for one plugin (a spare when there is one); the spares are topped up. */
  take(): PluginProcess {
    let taken = this.ready.shift();
    while (taken?.isolate.exited) {
      release(taken);
      taken = this.ready.shift();
    }
    setImmediate(() => this.refill());
    return taken ?? this.start();
  }

  /** Starts spares up to the number kept (at service start, so the first activation finds one). */
  refill(): void {
    for (let i = this.ready.length - 1; i >= 0; i--) {
      const spare = this.ready[i] as PluginProcess;
      if (spare.isolate.exited) {
        release(spare);
        this.ready.splice(i, 1);
      }
    }
    while (!this.closed && this.ready.length < this.spares) this.ready.push(this.start());
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(
      this.ready.splice(0).map(async (spare) => {
        await spare.isolate.kill();
        release(spare);
      }),
    );
  }

  private start(): PluginProcess {
    const slot = join(this.slotsDir, randomUUID());
    mkdirSync(slot, { recursive: true, mode: 0o700 });
    const a = this.natsAuth;
    // An open server with TLS: the CA and name go like credentials (a spare connects with them at once).
    const shared =
      a.kind === "shared"
        ? a
        : a.kind === "none" && a.tls
          ? { auth: { tls: a.tls }, inboxPrefix: null }
          : null;
    const isolate = startIsolate(
      this.worker.url,
      {
        natsServers: this.natsServers,
        natsAuth: shared !== null ? "shared" : a.kind,
        inboxPrefix: shared?.inboxPrefix ?? null,
      },
      this.memoryLimitMb,
      { imports: this.worker.imports, readable: [slot] },
    );
    // Secrets go over the IPC channel, never in the arguments (which `ps` shows).
    if (shared !== null) isolate.send({ type: "nats-auth", auth: shared.auth });
    return { isolate, slot };
  }
}

/** Removes a process's slot (its linked files; the cached package itself stays). */
function release(process: PluginProcess): void {
  rmSync(process.slot, { recursive: true, force: true });
}

export class WorkerHost {
  private readonly worker: Isolate;
  private readonly process: PluginProcess;
  private nextId = 0;
  private lastPong = Date.now();
  /** The id of the latest ping answered. */
  private answeredPing = 0;
  /** The process's resident memory once the plugin had started: what a stall's growth is measured from. */
  private residentAtStart: number | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private ended = false;
  private stopping = false;
  private handlers: ReadonlySet<string> = new Set();
  /** What the plugin's process said before it ended (an uncaught error). */
  private crash: string | undefined;
  readonly ready: Promise<void>;

  constructor(
    pool: WorkerPool,
    private readonly options: WorkerHostOptions,
  ) {
    this.process = pool.take();
    this.worker = this.process.isolate;
    // The plugin's files, where its process may read them (and nothing else of the cache).
    const home = join(this.process.slot, "package");
    linkTree(options.root, home);
    this.worker.send({
      type: "load",
      plugin: {
        entryUrl: pathToFileURL(join(home, options.entryFile)).href,
        // Where the package's files are: a load failure names the file and line within it.
        packageUrl: `${pathToFileURL(home).href}/`,
        entryTypeName: options.entryTypeName,
        pluginId: options.pluginId,
        version: options.version,
        subject: options.serve?.subject ?? null,
        queue: options.serve?.queue ?? null,
      },
      ...(options.nats ? { auth: options.nats.auth, inboxPrefix: options.nats.inboxPrefix } : {}),
    });
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`the plugin did not start within ${options.startTimeoutMs} ms`));
        void this.end();
      }, options.startTimeoutMs);
      const settle = (error?: Error) => {
        clearTimeout(timer);
        if (error) reject(error);
        else resolve();
      };
      this.worker.onMessage((raw) => {
        const message = raw as WorkerMessage;
        if (message.type === "ready") {
          this.handlers = new Set(message.handlers);
          this.residentAtStart = this.worker.residentBytes();
          this.startHeartbeat();
          settle();
        } else if (message.type === "failed") {
          const { error } = message;
          // V8 does not say where a module fails to compile: `node --check` on the package's files does
          // (the process is ended once the reason is settled, so its exit does not settle it first).
          const located =
            error.name === "SyntaxError" && error.location === undefined
              ? locateSyntaxError(options.root, options.entryFile).then((where) =>
                  where === undefined ? error.message : `${where}: SyntaxError: ${error.message}`,
                )
              : Promise.resolve(error.message);
          void located.then((reason) => {
            settle(new Error(reason));
            void this.end();
          });
        } else if (message.type === "crashed") {
          this.crash = `the plugin crashed: ${message.error.message.slice(0, 500)}`;
        } else this.onMessage(message);
      });
      this.worker.onExit((code, signal) => {
        const reason = this.crash ?? describeExit(code, signal);
        settle(new Error(`${reason} while starting`));
        this.fail(reason);
      });
    });
    // A start failure is reported by `ready`; a later one by onFailure.
    this.ready.catch(() => undefined);
  }

  /** New credentials for the plugin's NATS connection (a renewal): it reconnects with them, no gap. */
  renewNatsAuth(auth: WorkerNatsAuth): void {
    this.post({ type: "nats-auth", auth });
  }

  /** Whether the entry object has a method of this name. */
  has(handler: string): boolean {
    return this.handlers.has(handler);
  }

  /** Asks the plugin to deactivate, then ends the worker (after `graceMs` at most). */
  async stop(graceMs = 1_000): Promise<void> {
    if (this.ended) return;
    this.stopping = true;
    const stopped = new Promise<void>((resolve) => {
      const onMessage = (m: unknown) => {
        if ((m as WorkerMessage).type === "stopped") resolve();
      };
      this.worker.onMessage(onMessage);
      setTimeout(resolve, graceMs).unref();
    });
    this.worker.send({ type: "stop" });
    await stopped;
    await this.end();
  }

  get running(): boolean {
    return !this.ended;
  }

  private onMessage(message: WorkerMessage): void {
    switch (message.type) {
      case "pong":
        this.lastPong = Date.now();
        this.answeredPing = Math.max(this.answeredPing, message.id);
        return;
      case "span":
        recordProcessSpan(this.options, message);
        return;
      case "publish":
        // Published in the trace of the request the plugin was handling, when it names one.
        withContext(storedContext(traceparentOnly(message.traceparent)), () =>
          this.options.publish(message.event),
        ).then(
          () => this.post({ type: "published", id: message.id }),
          (error: unknown) =>
            this.post({ type: "published", id: message.id, error: (error as Error).message }),
        );
        return;
      case "log": {
        const fields = { pluginId: this.options.pluginId, data: message.data };
        const level = ["debug", "info", "warn", "error"].includes(message.level) ? message.level : "info";
        this.options.log[level](fields, `plugin: ${message.message.slice(0, 2_000)}`);
        return;
      }
      case "idle":
      case "ready":
      case "failed":
      case "crashed":
      case "stopped":
        return;
    }
  }

  private post(message: unknown): void {
    if (!this.ended) this.worker.send(message);
  }

  private startHeartbeat(): void {
    this.lastPong = Date.now();
    this.beat();
  }

  /**
   * Pings every quarter of the hang timeout. A worker silent for longer is asked once more before it is
   * failed: when this process's own loop was what stalled (a long collection, a slow synchronous step),
   * the pongs that answer the last pings are still unread when the timer fires, and the worker answers
   * the new ping before the grace ends: the heartbeat goes on. A worker in a busy loop or stalled in
   * garbage collection does not answer the new ping (a pong to an older one, read late, does not count).
   */
  private beat(): void {
    const every = Math.max(50, Math.floor(this.options.hangTimeoutMs / 4));
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.lastPong <= this.options.hangTimeoutMs) {
        this.post({ type: "ping", id: ++this.nextId });
        return;
      }
      clearInterval(this.heartbeat);
      const asked = ++this.nextId;
      this.post({ type: "ping", id: asked });
      // A heap at its limit stalls in garbage collection before V8 aborts the process: the grace also
      // gives the abort a moment to arrive (the exit names the memory limit) before calling the stall a
      // busy loop.
      setTimeout(() => {
        if (this.ended) return;
        // This ping answered (not an older one read late): alive, and the hang timeout counts afresh.
        if (this.answeredPing >= asked) this.startHeartbeat();
        else this.fail(this.stallReason());
      }, STALL_GRACE_MS).unref();
    }, every);
    this.heartbeat.unref();
  }

  /**
   * Why a worker stopped answering. A heap filling up towards its limit stalls the process in garbage
   * collection before V8 aborts it, so the heartbeat can notice first: when the process grew by half its
   * heap limit or more since it started, the reason is its memory, not a busy loop.
   */
  private stallReason(): string {
    const now = this.worker.residentBytes();
    const grownMb =
      now === undefined || this.residentAtStart === undefined ? 0 : (now - this.residentAtStart) / 2 ** 20;
    if (grownMb >= this.options.memoryLimitMb / 2) {
      return `the plugin exceeded its memory limit (${this.options.memoryLimitMb} MB): it stopped answering while its process grew by ${Math.round(grownMb)} MB`;
    }
    return `the plugin stopped answering for more than ${this.options.hangTimeoutMs} ms (a busy loop?)`;
  }

  private fail(reason: string): void {
    if (this.ended) return;
    const expected = this.stopping;
    void this.end();
    if (!expected) this.options.onFailure(reason);
  }

  private async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.heartbeat);
    await this.worker.kill();
    release(this.process);
  }
}

/** How long a stalled process is given to abort on its own (a full heap) before it is ended as stuck. */
const STALL_GRACE_MS = 1_000;

/** Why a plugin's process ended, in words (an out-of-memory abort, a signal, an exit code). */
function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  // V8 aborts the process when the heap limit is reached (SIGABRT, or SIGTRAP on some builds).
  if (signal === "SIGABRT" || signal === "SIGTRAP" || code === 134)
    return "the plugin exceeded its memory limit";
  if (signal !== null) return `the plugin's process was ended by ${signal}`;
  return `the plugin's process exited (code ${code})`;
}

/**
 * The first of a package's JavaScript modules (the entry first, then the others, at most 100) that does
 * not compile, as `<path>:<line>`, found with `node --check`; undefined when none is found.
 */
async function locateSyntaxError(root: string, entryFile: string): Promise<string | undefined> {
  const modules: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory() && entry.name !== "node_modules") walk(full);
      else if (entry.isFile() && /\.(mjs|js)$/.test(entry.name)) modules.push(relative(root, full));
    }
  };
  walk(root);
  const files = [entryFile, ...modules.filter((m) => m !== entryFile).sort()].slice(0, 100);
  for (const file of files) {
    try {
      await promisify(execFile)(process.execPath, ["--check", join(root, file)], { timeout: 5_000 });
    } catch (error) {
      const line = /:(\d+)\r?\n/.exec(String((error as { stderr?: string }).stderr ?? ""))?.[1];
      if (line !== undefined) return `${file}:${line}`;
    }
  }
  return undefined;
}
