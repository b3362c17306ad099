/**
 * Activation and deactivation, and what the runtime reports when it stops a plugin.
 * States (docs/plugins.md): `inactive` → activate → `active` → deactivate → `inactive`; the runtime moves
 * an `active` plugin to `failed` (crash, hang, memory, exit); activate moves a `failed` one back to
 * `active`. Each move is serialised per plugin across replicas (the plugin's advisory lock), and the
 * activating replica loads the plugin before the state changes, so a plugin that cannot start never
 * becomes `active`. Every replica follows within a second (the lifecycle broadcast).
 *
 * The moves ask a `LifecycleTables` port (`lifecycleTables` is the PostgreSQL one), so their rules are
 * unit-tested with the tables and the runtime in memory.
 */
import type { Principal } from "@svc/bus";
import { type Db, type Queries, sql } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import type { Logger } from "@svc/observability";

import {
  audit,
  type AuditTable,
  type HandlerWith,
  lockedPlugin,
  type PluginDeps,
  type PluginRow,
  type PluginState,
  view,
} from "./common.js";
import { refused } from "./packages.js";
import type { PluginRuntime } from "./runtime/runtime.js";

/** What one move of one plugin asks of the tables, while the plugin is locked. */
export interface PluginMove {
  /** The plugin as stored, or null when it is not installed. */
  readonly found: PluginRow | null;
  /** The capabilities the active plugins other than this one provide. */
  providedByOthers(): Promise<Set<string>>;
  /** The active plugins other than this one that require one of `capabilities`, by plugin id. */
  dependents(capabilities: readonly string[]): Promise<Array<{ pluginId: string; capability: string }>>;
  /** Sets the state (and clears the failure reason). */
  setState(state: Exclude<PluginState, "failed">): Promise<PluginRow>;
}

/** The plugins' lifecycle in the registry's tables. */
export interface LifecycleTables extends AuditTable {
  /** Runs `change` with the plugin locked: one move at a time per plugin, across replicas. */
  move<T>(pluginId: string, change: (move: PluginMove) => Promise<T>): Promise<T>;
  /** `active` → `failed` with the reason, only while that package is the one installed; null otherwise. */
  markFailed(pluginId: string, sha256: string, reason: string): Promise<PluginRow | null>;
}

export interface ActivationDeps extends Pick<PluginDeps, "metrics" | "announce"> {
  readonly lifecycle: LifecycleTables;
  readonly runtime: Pick<PluginRuntime, "load" | "unload" | "runningVersion">;
  readonly log: Logger;
}

/** The PostgreSQL lifecycle tables. */
export function lifecycleTables(db: Db): LifecycleTables {
  return {
    move: (pluginId, change) =>
      db.transaction(async (tx) => {
        const found = await lockedPlugin(tx, pluginId);
        return change({
          found,
          providedByOthers: () => providedByOthers(tx, pluginId),
          async dependents(capabilities) {
            const rows = await tx.any<{ plugin_id: string; capability: string }>(sql`
              SELECT p.plugin_id, c AS capability
              FROM plugin_registry.plugins p,
                   jsonb_array_elements_text(coalesce(p.registry->'requiresCapabilities', '[]'::jsonb)) AS c
              WHERE p.state = 'active' AND p.plugin_id <> ${pluginId} AND c = ANY(${capabilities}::text[])
              ORDER BY p.plugin_id`);
            return rows.map((r) => ({ pluginId: r.plugin_id, capability: r.capability }));
          },
          setState: (state) =>
            tx.one<PluginRow>(sql`
              UPDATE plugin_registry.plugins SET state = ${state}, failure_reason = NULL, updated_at = now()
              WHERE plugin_id = ${pluginId} RETURNING *`),
        });
      }),
    markFailed: (pluginId, sha256, reason) =>
      db.maybeOne<PluginRow>(sql`
        UPDATE plugin_registry.plugins SET state = 'failed', failure_reason = ${reason.slice(0, 1_000)}, updated_at = now()
        WHERE plugin_id = ${pluginId} AND package_sha256 = ${sha256} AND state = 'active'
        RETURNING *`),
    audit: (principal, action, plugin, error) => audit(db, principal, action, plugin, error),
  };
}

const RUNTIME: Principal = {
  subject: "svc:plugin-runtime",
  scope: "platform",
  workspaceKey: null,
  permissions: [],
  roles: [],
};

async function move(
  deps: ActivationDeps,
  principal: Principal,
  id: string,
  action: "activate" | "deactivate",
) {
  let version: string | undefined;
  try {
    const row = await deps.metrics.time(action, () =>
      deps.lifecycle.move(id, async (tables) => {
        const found = tables.found;
        if (found === null) throw new NotFoundError(`Plugin '${id}' is not installed.`);
        version = found.version;
        if (action === "deactivate") {
          if (found.state === "inactive") return found;
          await refuseWhileNeeded(tables, found);
          await deps.runtime.unload(id);
          return tables.setState("inactive");
        }
        if (found.refused_reason !== null) {
          throw refused(
            "refused",
            `Plugin '${id}' was refused when it was last loaded: ${found.refused_reason}`,
          );
        }
        if (found.state === "active" && deps.runtime.runningVersion(id) === found.package_sha256)
          return found;
        await requireCapabilities(tables, found);
        try {
          await deps.runtime.load(found);
        } catch (error) {
          const reason = (error as { extensions?: { reason?: unknown } }).extensions?.reason;
          throw refused(
            typeof reason === "string" ? reason : "activation-failed",
            `Plugin '${id}' could not be activated: ${(error as Error).message}`,
          );
        }
        return tables.setState("active");
      }),
    );
    await deps.lifecycle.audit(principal, action, { id, version });
    deps.announce(id);
    return { status: 200, body: view(row) };
  } catch (error) {
    await deps.lifecycle.audit(principal, action, { id, version }, error);
    throw error;
  }
}

/** The capabilities the active plugins other than `id` provide. */
async function providedByOthers(tx: Queries, id: string): Promise<Set<string>> {
  const rows = await tx.any<{ capability: string }>(sql`
    SELECT DISTINCT c AS capability
    FROM plugin_registry.plugins p,
         jsonb_array_elements_text(coalesce(p.registry->'capabilities', '[]'::jsonb)) AS c
    WHERE p.state = 'active' AND p.plugin_id <> ${id}`);
  return new Set(rows.map((r) => r.capability));
}

/**
 * `requiresCapabilities`: a plugin is activated only when every capability it requires
 * is provided by an active plugin (or by itself); otherwise a 422 naming the first one missing.
 */
async function requireCapabilities(tables: PluginMove, plugin: PluginRow): Promise<void> {
  const required = plugin.registry.requiresCapabilities ?? [];
  if (required.length === 0) return;
  const provided = await tables.providedByOthers();
  for (const own of plugin.registry.capabilities ?? []) provided.add(own);
  const missing = required.find((c) => !provided.has(c));
  if (missing !== undefined) {
    throw refused(
      "missing-capability",
      `Plugin '${plugin.plugin_id}' requires the capability '${missing}', which no active plugin provides: install and activate a plugin that lists it in its capabilities first.`,
      { capability: missing },
    );
  }
}

/**
 * A provider is not deactivated while an active plugin needs a capability only it provides: a 409 naming
 * the plugins to deactivate first (docs/plugins.md).
 */
async function refuseWhileNeeded(tables: PluginMove, plugin: PluginRow): Promise<void> {
  const offered = plugin.registry.capabilities ?? [];
  if (offered.length === 0) return;
  const others = await tables.providedByOthers();
  const onlyHere = offered.filter((c) => !others.has(c));
  if (onlyHere.length === 0) return;
  const dependents = await tables.dependents(onlyHere);
  if (dependents.length === 0) return;
  const names = [...new Set(dependents.map((d) => d.pluginId))];
  throw new SvcError(
    ErrorCode.Conflict,
    `Plugin '${plugin.plugin_id}' provides '${dependents[0]?.capability}', which the active plugin(s) ${names.map((n) => `'${n}'`).join(", ")} require and no other active plugin provides: deactivate them first.`,
    { extensions: { rule: "capability-in-use", dependents: names } },
  );
}

type Handler<K extends "plugins.activate" | "plugins.deactivate"> = HandlerWith<ActivationDeps, K>;

export const activate: Handler<"plugins.activate"> = (deps, req) =>
  move(deps, req.principal, req.params.id, "activate");

export const deactivate: Handler<"plugins.deactivate"> = (deps, req) =>
  move(deps, req.principal, req.params.id, "deactivate");

/**
 * The runtime stopped a plugin (or could not load it): `active` → `failed` with the reason, audited,
 * counted, and announced so that every replica unloads it. Only the package that failed is marked: an
 * update that replaced it meanwhile is left alone.
 */
export async function recordFailure(deps: ActivationDeps, id: string, sha256: string, reason: string) {
  deps.log.warn({ pluginId: id, reason }, "the plugin runtime stopped a plugin");
  deps.metrics.failed(reason);
  const row = await deps.lifecycle.markFailed(id, sha256, reason);
  if (row === null) return;
  await deps.lifecycle.audit(RUNTIME, "fail", { id, version: row.version }, reason);
  deps.announce(id);
}
