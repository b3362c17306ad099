/**
 * A workspace's plugin chain: the ordered plugins the workspace uses,
 * `chain[0]` the primary. The PUT replaces the whole chain. Only installed plugins the workspace is
 * entitled to can join a chain, and a workspace session (a tenant's own admin) may put in only plugins
 * delegated to its tenant. Uninstalling a plugin takes it out of every chain. The public ui-chain route and
 * the sessions' plugin keys count only entries that are `active` and still entitled.
 */
import { reachOf } from "@svc/access";
import { type Queries, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import { audit, type HandlerWith, type RouteName } from "./common.js";
import {
  chainEntitled,
  type EntitlementDeps,
  entitlementOf,
  grantTable,
  isDelegated,
  tenantOf,
} from "./entitlements.js";

type Handler<K extends RouteName> = HandlerWith<EntitlementDeps, K>;

interface ChainRow {
  plugin_id: string;
  version: string;
  state: string;
  position: number;
  tenant_key: string | null;
  entitled: boolean;
  assigned_at: Date;
}

const chainOf = (db: Queries, workspaceKey: string) =>
  db.any<ChainRow>(sql`
    SELECT w.plugin_id, p.version, p.state, w.position, w.tenant_key, w.assigned_at, ${chainEntitled} AS entitled
    FROM plugin_registry.workspace_plugins w JOIN plugin_registry.plugins p USING (plugin_id)
    WHERE w.workspace_key = ${workspaceKey} ORDER BY w.position`);

/**
 * The chain's answer. The tenant is the rows' (as assigned), else the workspace's own for an empty chain
 * (null for a workspace the resolver does not know).
 */
async function body(deps: Pick<EntitlementDeps, "tenancy">, workspaceKey: string, rows: readonly ChainRow[]) {
  const tenantKey =
    rows[0]?.tenant_key ??
    (await tenantOf(deps, workspaceKey).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    }));
  return {
    workspaceKey,
    tenantKey,
    chain: rows.map((r, i) => ({
      pluginId: r.plugin_id,
      version: r.version,
      state: r.state,
      entitled: r.entitled,
      position: i,
    })),
    updatedAtUtc:
      rows.length === 0
        ? null
        : new Date(Math.max(...rows.map((r) => r.assigned_at.getTime()))).toISOString(),
  };
}

export const getChain: Handler<"assignments.get"> = async (deps, req) => {
  return {
    status: 200,
    body: await body(deps, req.params.workspaceKey, await chainOf(deps.db, req.params.workspaceKey)),
  };
};

export const putChain: Handler<"assignments.put"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  const chain = req.body.chain;
  const tenantKey = await tenantOf(deps, wk);
  const tenantAdmin = reachOf(req.principal).kind === "workspace";
  await deps.db.transaction(async (tx) => {
    // One chain change at a time per workspace, across replicas.
    await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`chain:${wk}`}))`);
    const known = await tx.any<{ plugin_id: string }>(
      sql`SELECT plugin_id FROM plugin_registry.plugins WHERE plugin_id = ANY(${chain}::text[]) FOR SHARE`,
    );
    const installed = new Set(known.map((r) => r.plugin_id));
    const violations: Array<{ field: string; message: string }> = [];
    // A workspace session changes only delegated entries: what the platform put in the
    // chain and never delegated stays, in the same order (and may stay although not delegated).
    const fixed: string[] = [];
    if (tenantAdmin) {
      const current = await tx.any<{ plugin_id: string }>(sql`
        SELECT plugin_id FROM plugin_registry.workspace_plugins WHERE workspace_key = ${wk} ORDER BY position`);
      for (const { plugin_id } of current) {
        if (!(await isDelegated(tx, tenantKey, plugin_id))) fixed.push(plugin_id);
      }
      if (chain.filter((id) => fixed.includes(id)).join("\n") !== fixed.join("\n")) {
        violations.push({
          field: "/body/chain",
          message: `the platform's entries [${fixed.join(", ")}] are not delegated to tenant '${tenantKey}': they stay, in this order`,
        });
      }
    }
    for (const [i, id] of chain.entries()) {
      const field = `/body/chain/${i}`;
      if (!installed.has(id)) {
        violations.push({ field, message: `plugin '${id}' is not installed` });
      } else if (
        !fixed.includes(id) &&
        (await entitlementOf(grantTable(tx), id, tenantKey, wk)).via === null
      ) {
        violations.push({ field, message: `workspace '${wk}' is not entitled to plugin '${id}'` });
      } else if (tenantAdmin && !fixed.includes(id) && !(await isDelegated(tx, tenantKey, id))) {
        violations.push({ field, message: `plugin '${id}' is not delegated to tenant '${tenantKey}'` });
      }
    }
    if (violations.length > 0) throw new ValidationError(violations);
    await tx.query(sql`DELETE FROM plugin_registry.workspace_plugins WHERE workspace_key = ${wk}`);
    await tx.query(sql`
      INSERT INTO plugin_registry.workspace_plugins (workspace_key, plugin_id, position, tenant_key, assigned_by)
      SELECT ${wk}, id, ord - 1, ${tenantKey}, ${req.principal.subject}
      FROM unnest(${chain}::text[]) WITH ORDINALITY AS t(id, ord)`);
  });
  await audit(deps.db, req.principal, `assign ${wk}: [${chain.join(", ")}]`, {}, undefined, wk);
  // Followers fetch the whole set again: one nudge covers the plugins that joined and those that left.
  deps.announce(chain[0] ?? "");
  return { status: 200, body: await body(deps, wk, await chainOf(deps.db, wk)) };
};

/** The public UI chain: the workspace's active, entitled plugins in order (chain[0] the primary). */
export async function publicChain(db: Queries, workspaceKey: string): Promise<string[]> {
  if (typeof workspaceKey !== "string" || workspaceKey.length > 63) return [];
  const rows = await db.any<{ plugin_id: string }>(sql`
    SELECT w.plugin_id FROM plugin_registry.workspace_plugins w JOIN plugin_registry.plugins p USING (plugin_id)
    WHERE w.workspace_key = ${workspaceKey} AND p.state = 'active' AND ${chainEntitled}
    ORDER BY w.position`);
  return rows.map((r) => r.plugin_id);
}
