/**
 * The plugin runtime of one registry replica (ADR 0007). It keeps exactly the plugins whose state is
 * `active` loaded, each in its own worker, which serves the plugin's routes on the plugin's subject
 * (`<prefix>.plugins.<pluginId>.http`, queue group `plugin.<pluginId>`) with its own NATS connection: the
 * contract any NATS client can serve instead (docs/wire-contract.md). It reconciles with the database at
 * start, on every lifecycle broadcast and every 30 s. A plugin only loads from a package that verifies at
 * that moment.
 */
import type { EventPublisher } from "@svc/bus";
import { outsideDeadline } from "@svc/errors";
import type { Logger } from "@svc/observability";
import { EventSource, pluginHttpSubject, pluginQueueGroup } from "@svc/wire-contract";

import type { PluginRow } from "../common.js";
import type { PluginRegistryConfig } from "../settings.js";
import type { ExtractionCache } from "./cache.js";
import type { PluginCredentials } from "./plugin-credentials.js";
import { type PublishedByPlugin, WorkerHost, WorkerPool } from "./worker-host.js";

interface Loaded {
  readonly sha256: string;
  /** The verified package on disk (the extraction cache). */
  readonly root: string;
  /** None for an `external` plugin, which serves its subject itself. */
  readonly host: WorkerHost | undefined;
  /** Renews the plugin's minted NATS user before it expires. */
  renewal?: NodeJS.Timeout;
}

const running = (entry: Loaded | undefined) =>
  entry !== undefined && (entry.host === undefined || entry.host.running);

export interface RuntimeOptions {
  /** NATS server URL(s) the workers connect to. */
  readonly natsUrl: string;
  /** How plugin processes authenticate to NATS (never with the registry's own credentials). */
  readonly credentials: PluginCredentials;
  readonly prefix: string;
  readonly cache: ExtractionCache;
  readonly settings: PluginRegistryConfig["backendHost"];
  readonly events: EventPublisher;
  readonly log: Logger;
  /** Called with each plugin's verified package before it starts (its UI assets are published). */
  readonly onVerified?: (row: PluginRow, root: string) => Promise<void>;
  /** Whether the workspace's chain holds the plugin while it is entitled there (where it may publish). */
  readonly inChain: (pluginId: string, workspaceKey: string) => Promise<boolean>;
  /** The plugin was stopped by the runtime (crash, hang, memory, exit): record it. */
  readonly onFailure: (pluginId: string, sha256: string, reason: string) => void;
}

export class PluginRuntime {
  private readonly loaded = new Map<string, Loaded>();
  private readonly loading = new Map<string, Promise<Loaded>>();

  private readonly pool: WorkerPool;

  constructor(private readonly o: RuntimeOptions) {
    this.pool = new WorkerPool({
      memoryLimitMb: o.settings.pluginMemoryLimitMb,
      natsServers: o.natsUrl.split(",").map((u) => u.trim()),
      slotsDir: o.cache.slotsDir,
      spares: o.settings.pluginSpareProcesses,
      natsAuth: o.credentials.pool(),
    });
    this.pool.refill();
  }

  /** Whether the plugin runs here (its package hash), for tests and /health. */
  runningVersion(pluginId: string): string | undefined {
    const entry = this.loaded.get(pluginId);
    return running(entry) ? entry?.sha256 : undefined;
  }

  /** Where a plugin running here has its verified package, with the package hash; undefined otherwise. */
  packageOf(pluginId: string): { root: string; sha256: string } | undefined {
    const entry = this.loaded.get(pluginId);
    return running(entry) && entry !== undefined ? { root: entry.root, sha256: entry.sha256 } : undefined;
  }

  /**
   * Loads the plugin of `row` (or reuses it when the same package runs already); rejects when the package
   * does not verify or the plugin fails to start.
   */
  async load(row: PluginRow): Promise<void> {
    const current = this.loaded.get(row.plugin_id);
    if (current !== undefined && current.sha256 === row.package_sha256 && running(current)) return;
    const key = `${row.plugin_id}@${row.package_sha256}`;
    let pending = this.loading.get(key);
    if (pending === undefined) {
      pending = this.start(row);
      this.loading.set(key, pending);
    }
    let started: Loaded;
    try {
      started = await pending;
    } finally {
      // Only once it counts as loaded (below) or failed: a prune in between would find it in neither.
      if (this.loading.get(key) === pending) this.loading.delete(key);
    }
    const previous = this.loaded.get(row.plugin_id);
    this.loaded.set(row.plugin_id, started);
    if (previous !== undefined && previous !== started) await this.dispose(previous);
  }

  /** Unloads the plugin (deactivate, uninstall, failure elsewhere). */
  async unload(pluginId: string): Promise<void> {
    const entry = this.loaded.get(pluginId);
    if (entry === undefined) return;
    this.loaded.delete(pluginId);
    await this.dispose(entry);
  }

  /** Loads every active plugin not running here and unloads every other one. */
  async reconcile(rows: readonly PluginRow[]): Promise<void> {
    const wanted = new Map(rows.filter((r) => r.state === "active").map((r) => [r.plugin_id, r]));
    for (const id of [...this.loaded.keys()]) {
      const row = wanted.get(id);
      const entry = this.loaded.get(id);
      if (row === undefined || entry?.sha256 !== row.package_sha256 || !running(entry)) {
        await this.unload(id);
      }
    }
    for (const row of wanted.values()) {
      if (this.loaded.has(row.plugin_id)) continue;
      try {
        await this.load(row);
      } catch (error) {
        this.o.log.warn({ pluginId: row.plugin_id, err: error }, "an active plugin could not be loaded here");
        this.o.onFailure(
          row.plugin_id,
          row.package_sha256,
          `could not be loaded: ${(error as Error).message}`,
        );
      }
    }
    // Unpacked packages stay while installed (an inactive plugin's too), and while one loads or runs here:
    // an activation unpacks its package before the plugin is marked active, so a reconcile that read the
    // rows earlier (one following the deactivation just before, say) must not remove it meanwhile.
    const installed = new Set(rows.map((r) => r.package_sha256));
    await this.o.cache.prune(
      (sha256) =>
        installed.has(sha256) ||
        [...this.loaded.values()].some((entry) => entry.sha256 === sha256) ||
        [...this.loading.keys()].some((key) => key.endsWith(`@${sha256}`)),
    );
  }

  async stop(): Promise<void> {
    await Promise.all([...this.loaded.keys()].map((id) => this.unload(id)));
    await this.pool.close();
  }

  private async start(row: PluginRow): Promise<Loaded> {
    const { root, opened } = await this.o.cache.prepare(row.package_sha256);
    await this.o.onVerified?.(row, root);
    const registry = opened.registry;
    // An external plugin is served by its own process over NATS (docs/wire-contract.md): nothing to run.
    if (registry.runtime === "external") return { sha256: row.package_sha256, root, host: undefined };
    const declared = new Set(registry.events ?? []);
    const own = this.o.credentials.minting
      ? await this.o.credentials.forActivation(row.plugin_id, [...declared])
      : undefined;
    // The process outlives the request that activates it: its events, failures and heartbeats are
    // handled outside that request's deadline (else, once it passed, each would be refused).
    const host: WorkerHost = outsideDeadline(
      () =>
        new WorkerHost(this.pool, {
          pluginId: row.plugin_id,
          version: registry.version,
          root,
          entryFile: registry.assemblyFileName,
          entryTypeName: registry.entryTypeName,
          hangTimeoutMs: this.o.settings.pluginHangTimeoutMs,
          memoryLimitMb: this.o.settings.pluginMemoryLimitMb,
          startTimeoutMs: 10_000,
          serve: {
            subject: pluginHttpSubject(this.o.prefix, row.plugin_id),
            queue: pluginQueueGroup(row.plugin_id),
          },
          ...(own ? { nats: { auth: own.auth, inboxPrefix: own.inboxPrefix } } : {}),
          log: this.o.log,
          publish: (event) => this.publish(row.plugin_id, declared, event),
          onFailure: (reason) => {
            const entry = this.loaded.get(row.plugin_id);
            if (entry?.host === host) void this.unload(row.plugin_id);
            this.o.onFailure(row.plugin_id, row.package_sha256, reason);
          },
        }),
    );
    try {
      await host.ready;
      const missing = (registry.routes ?? []).filter((r) => !host.has(r.handler)).map((r) => r.handler);
      if (missing.length > 0) {
        throw new Error(`the entry object lacks the route handler(s) ${missing.join(", ")}`);
      }
    } catch (error) {
      await host.stop(0);
      throw error;
    }
    const loaded: Loaded = { sha256: row.package_sha256, root, host };
    if (own) this.renewBefore(loaded, row.plugin_id, [...declared], own.expiresAt);
    return loaded;
  }

  /**
   * Mints the plugin's next NATS user at two thirds of the current one's life and hands it to the process,
   * which moves to it without a gap; a failed mint is tried again shortly (the old user still works).
   */
  private renewBefore(entry: Loaded, pluginId: string, events: string[], expiresAt: number): void {
    const inMs = Math.max(1_000, Math.floor(((expiresAt - Date.now()) * 2) / 3));
    entry.renewal = outsideDeadline(() =>
      setTimeout(() => {
        if (!entry.host?.running) return;
        this.o.credentials.forActivation(pluginId, events).then(
          (next) => {
            entry.host?.renewNatsAuth(next.auth);
            this.o.log.info(
              {
                pluginId,
                expiresAt: new Date(next.expiresAt).toISOString(),
                replacedExpiresAt: new Date(expiresAt).toISOString(),
              },
              "renewed a plugin's NATS credentials",
            );
            this.renewBefore(entry, pluginId, events, next.expiresAt);
          },
          (error: unknown) => {
            this.o.log.warn({ pluginId, err: error }, "could not renew a plugin's NATS credentials");
            this.renewBefore(entry, pluginId, events, Date.now() + 15_000);
          },
        );
      }, inMs),
    );
    entry.renewal.unref();
  }

  private async dispose(entry: Loaded): Promise<void> {
    clearTimeout(entry.renewal);
    await entry.host?.stop();
  }

  /**
   * A plugin's event: only a name it declares, in its own namespace; into no workspace
   * (a platform event) or only a workspace whose chain holds the plugin while it is entitled there.
   */
  private async publish(pluginId: string, declared: ReadonlySet<string>, event: PublishedByPlugin) {
    if (
      typeof event?.eventName !== "string" ||
      !declared.has(event.eventName) ||
      !event.eventName.startsWith(`${pluginId}.`)
    ) {
      throw new Error(`'${String(event?.eventName)}' is not an event this plugin declares in registry.json`);
    }
    if (event.workspaceKey !== null && typeof event.workspaceKey !== "string") {
      throw new Error("workspaceKey is a string or null");
    }
    if (event.workspaceKey !== null && !(await this.o.inChain(pluginId, event.workspaceKey))) {
      throw new Error(
        `the plugin is not in workspace '${event.workspaceKey}''s chain (or not entitled there): it cannot publish into it`,
      );
    }
    await this.o.events.publish(event.eventName, event.workspaceKey, event.payload, {
      source: EventSource.plugin(pluginId),
    });
    this.o.log.debug({ pluginId, eventName: event.eventName }, "plugin event published");
  }
}
