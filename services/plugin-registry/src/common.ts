/** What the plugin registry's handlers share: their dependencies, the stored record, the audit, metrics. */
import type { Principal } from "@svc/bus";
import type {
  PlatformEventData,
  PlatformEventName,
  pluginRegistryRoutes,
  RouteHandlerWith,
} from "@svc/contracts";
import { type Db, deleteOlderThan, type Queries, sql, type SweepOptions } from "@svc/db";
import { SvcError } from "@svc/errors";
import { Counter, Histogram, type Registry } from "@svc/observability";
import { contributedKeys, type RegistryJson, type Theme } from "@svc/plugin-package";
import type { PackageStore } from "@svc/plugin-package/store";

import type { PluginRegistryConfig } from "./settings.js";

type Routes = typeof pluginRegistryRoutes;
/** A route's handler with dependencies `D`; its request and reply types come from the route's contract. */
export type HandlerWith<D, K extends keyof Routes> = RouteHandlerWith<D, Routes[K]>;
export type PluginHandler<K extends keyof Routes> = HandlerWith<PluginDeps, K>;
/** The name of one of the registry's routes. */
export type RouteName = keyof Routes;

export interface PluginDeps {
  readonly db: Db;
  readonly store: PackageStore;
  readonly settings: PluginRegistryConfig["backendHost"];
  readonly hostVersion: string;
  readonly metrics: LifecycleMetrics;
  /** Tells the services that hold a plugin's contributions (keys, masked fields, events) to refresh. */
  readonly announce: (pluginId: string) => void;
  /** Time limit of a package download from the feed. */
  readonly feedTimeoutMs: number;
  /** Publishes a platform event (plugin.refused). */
  readonly publishEvent?: <N extends PlatformEventName>(
    eventName: N,
    payload: PlatformEventData[N],
  ) => Promise<void>;
}

export type PluginState = "inactive" | "active" | "failed";

export interface PluginRow {
  plugin_id: string;
  name: string;
  version: string;
  tier: "system" | "application";
  contract_version: string;
  package_sha256: string;
  signed: boolean;
  signer_fingerprint: string | null;
  publisher_id: string | null;
  registry: RegistryJson;
  /** theme.json as parsed at install; null when the package has none. */
  theme: Theme | null;
  state: PluginState;
  failure_reason: string | null;
  refused_reason: string | null;
  installed_at: Date;
  updated_at: Date;
}

/** Every installed plugin, by id. */
export const allPlugins = (db: Queries) =>
  db.any<PluginRow>(sql`SELECT * FROM plugin_registry.plugins ORDER BY plugin_id`);

/** The installed plugin of that id, or null. */
export const findPlugin = (db: Queries, pluginId: string) =>
  db.maybeOne<PluginRow>(sql`SELECT * FROM plugin_registry.plugins WHERE plugin_id = ${pluginId}`);

export function view(row: PluginRow) {
  return {
    pluginId: row.plugin_id,
    name: row.name,
    version: row.version,
    tier: row.tier,
    contractVersion: row.contract_version,
    signed: row.signed,
    signerFingerprint: row.signer_fingerprint,
    publisherId: row.publisher_id,
    packageSha256: row.package_sha256,
    permissions: contributedKeys(row.registry),
    sensitiveFields: [...(row.registry.sensitiveFields ?? [])],
    events: [...(row.registry.events ?? [])],
    isActive: row.state === "active",
    state: row.state,
    failureReason: row.failure_reason,
    routes: (row.registry.routes ?? []).map((route) => ({
      method: route.method,
      path: route.path,
      permission: route.permission ?? "",
    })),
    trustStatus: row.refused_reason === null ? ("trusted" as const) : ("refused" as const),
    refusedReason: row.refused_reason,
    installedAtUtc: row.installed_at.toISOString(),
    updatedAtUtc: row.updated_at.toISOString(),
  };
}

/** svc_plugin_lifecycle_operations_total and svc_plugin_lifecycle_duration_ms, by action and outcome. */
export function lifecycleMetrics(registry: Registry) {
  const operations = new Counter({
    name: "svc_plugin_lifecycle_operations_total",
    help: "Plugin lifecycle operations (install, update, uninstall, verify, activate, deactivate) by outcome (succeeded, refused, failed).",
    labelNames: ["action", "outcome"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "svc_plugin_lifecycle_duration_ms",
    help: "Duration of plugin lifecycle operations in milliseconds, by action and outcome.",
    labelNames: ["action", "outcome"] as const,
    buckets: [5, 10, 25, 50, 100, 200, 500, 1_000, 2_500, 5_000, 10_000],
    registers: [registry],
  });
  const failures = new Counter({
    name: "svc_plugin_runtime_failures_total",
    help: "Plugins the runtime stopped, by cause (crash, hang, memory, exit, load).",
    labelNames: ["cause"] as const,
    registers: [registry],
  });
  return {
    /** Counts a plugin the runtime stopped; the cause is read off the reason. */
    failed(reason: string) {
      const cause = /memory/.test(reason)
        ? "memory"
        : /stopped answering/.test(reason)
          ? "hang"
          : /exited/.test(reason)
            ? "exit"
            : /could not be loaded/.test(reason)
              ? "load"
              : "crash";
      failures.inc({ cause });
    },
    /**
     * Times one operation. Outcome `succeeded`; `refused` when the request was turned down (a 4xx: a bad or
     * untrusted package, a conflict, an unknown plugin); `failed` when the platform failed (anything else).
     */
    async time<T>(action: string, work: () => Promise<T>): Promise<T> {
      const started = performance.now();
      let outcome = "failed";
      try {
        const result = await work();
        outcome = "succeeded";
        return result;
      } catch (error) {
        if (error instanceof SvcError && error.status < 500) outcome = "refused";
        throw error;
      } finally {
        operations.inc({ action, outcome });
        duration.observe({ action, outcome }, performance.now() - started);
      }
    },
  };
}
export type LifecycleMetrics = ReturnType<typeof lifecycleMetrics>;

/** The registry's audit, as the tables' ports record in it. */
export interface AuditTable {
  /** Records an action about a plugin: succeeded without `error`, failed with it (see `audit`). */
  audit(
    principal: Principal,
    action: string,
    plugin: { id?: string; version?: string },
    error?: unknown,
  ): Promise<void>;
}

/**
 * Records a lifecycle action: succeeded without `error`, failed with it. A string `error` is the reason as
 * written; an SvcError gives its reason code and message; anything else is an internal error.
 */
export async function audit(
  db: Queries,
  principal: Principal,
  action: string,
  plugin: { id?: string | null; version?: string | null },
  error?: unknown,
  /** The workspace the entry is about (a chain, a theme): a workspace session sees only its own. */
  workspaceKey: string | null = null,
): Promise<void> {
  const reason =
    error === undefined
      ? null
      : typeof error === "string"
        ? error.slice(0, 1_000)
        : error instanceof SvcError
          ? `${reasonOf(error)}: ${error.message}`
          : "internal error";
  await db.query(sql`
    INSERT INTO plugin_registry.audit (actor, actor_name, action, plugin_id, version, outcome, reason, workspace_key)
    VALUES (${principal.subject}, ${principal.name ?? null}, ${action}, ${plugin.id ?? null}, ${plugin.version ?? null},
            ${error === undefined ? "succeeded" : "failed"}, ${reason}, ${workspaceKey})`);
}

/**
 * Deletes the audit entries older than `days`, a batch at a time, stopping after the batch in hand when
 * `signal` is aborted. Returns how many it deleted.
 */
export const deleteOldAudit = (db: Queries, days: number, options: SweepOptions = {}) =>
  deleteOlderThan(db, "plugin_registry.audit", "at", days, options);

/** The refusal's reason code (`SVC_PLUGIN_REFUSED`), else the error code. */
export const reasonOf = (error: SvcError): string =>
  typeof error.extensions.reason === "string" ? error.extensions.reason : error.code;

export const lockPlugin = (tx: Queries, pluginId: string) =>
  tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`plugin:${pluginId}`}))`);

/** Takes the plugin id's lock in `tx` (until it ends), then reads the plugin installed under it, or null. */
export async function lockedPlugin(tx: Queries, pluginId: string): Promise<PluginRow | null> {
  await lockPlugin(tx, pluginId);
  return findPlugin(tx, pluginId);
}
