/**
 * Activation and deactivation, and what the runtime reports when it stops a plugin.
 * States (docs/plugins.md): `inactive` → activate → `active` → deactivate → `inactive`; the runtime moves
 * an `active` plugin to `failed` (crash, hang, memory, exit); activate moves a `failed` one back to
 * `active`. Each move is serialised per plugin across replicas (the plugin's advisory lock), and the
 * activating replica loads the plugin before the state changes, so a plugin that cannot start never
 * becomes `active`. Every replica follows within a second (the lifecycle broadcast).
 */
import type { Principal } from "@svc/bus";
import { type Queries, sql } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import type { Logger } from "@svc/observability";

import { audit, type HandlerWith, lockPlugin, type PluginDeps, type PluginRow, view } from "./common.js";
import { refused } from "./packages.js";
import type { PluginRuntime } from "./runtime/runtime.js";

export interface ActivationDeps extends PluginDeps {
  readonly runtime: PluginRuntime;
  readonly log: Logger;
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
      deps.db.transaction(async (tx) => {
        await lockPlugin(tx, id);
        const found = await tx.maybeOne<PluginRow>(
          sql`SELECT * FROM plugin_registry.plugins WHERE plugin_id = ${id}`,
        );
        if (found === null) throw new NotFoundError(`Plugin '${id}' is not installed.`);
        version = found.version;
        if (action === "deactivate") {
          if (found.state === "inactive") return found;
          await refuseWhileNeeded(tx, found);
          await deps.runtime.unload(id);
          return tx.one<PluginRow>(sql`
            UPDATE plugin_registry.plugins SET state = 'inactive', failure_reason = NULL, updated_at = now()
            WHERE plugin_id = ${id} RETURNING *`);
        }
        if (found.refused_reason !== null) {
          throw refused(
            "refused",
            `Plugin '${id}' was refused when it was last loaded: ${found.refused_reason}`,
          );
        }
        if (found.state === "active" && deps.runtime.runningVersion(id) === found.package_sha256)
          return found;
        await requireCapabilities(tx, found);
        try {
          await deps.runtime.load(found);
        } catch (error) {
          const reason = (error as { extensions?: { reason?: unknown } }).extensions?.reason;
          throw refused(
            typeof reason === "string" ? reason : "activation-failed",
            `Plugin '${id}' could not be activated: ${(error as Error).message}`,
          );
        }
        return tx.one<PluginRow>(sql`
          UPDATE plugin_registry.plugins SET state = 'active', failure_reason = NULL, updated_at = now()
          WHERE plugin_id = ${id} RETURNING *`);
      }),
    );
    await audit(deps.db, principal, action, { id, version });
    deps.announce(id);
    return { status: 200, body: view(row) };
  } catch (error) {
    await audit(deps.db, principal, action, { id, version }, error);
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
async function requireCapabilities(tx: Queries, plugin: PluginRow): Promise<void> {
  const required = plugin.registry.requiresCapabilities ?? [];
  if (required.length === 0) return;
  const provided = await providedByOthers(tx, plugin.plugin_id);
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
async function refuseWhileNeeded(tx: Queries, plugin: PluginRow): Promise<void> {
  const offered = plugin.registry.capabilities ?? [];
  if (offered.length === 0) return;
  const others = await providedByOthers(tx, plugin.plugin_id);
  const onlyHere = offered.filter((c) => !others.has(c));
  if (onlyHere.length === 0) return;
  const dependents = await tx.any<{ plugin_id: string; capability: string }>(sql`
    SELECT p.plugin_id, c AS capability
    FROM plugin_registry.plugins p,
         jsonb_array_elements_text(coalesce(p.registry->'requiresCapabilities', '[]'::jsonb)) AS c
    WHERE p.state = 'active' AND p.plugin_id <> ${plugin.plugin_id} AND c = ANY(${onlyHere}::text[])
    ORDER BY p.plugin_id`);
  if (dependents.length === 0) return;
  const names = [...new Set(dependents.map((d) => d.plugin_id))];
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
  const row = await deps.db.maybeOne<PluginRow>(sql`
    UPDATE plugin_registry.plugins SET state = 'failed', failure_reason = ${reason.slice(0, 1_000)}, updated_at = now()
    WHERE plugin_id = ${id} AND package_sha256 = ${sha256} AND state = 'active'
    RETURNING *`);
  if (row === null) return;
  await audit(deps.db, RUNTIME, "fail", { id, version: row.version }, reason);
  deps.announce(id);
}
