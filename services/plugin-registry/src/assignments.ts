/**
 * A workspace's plugin chain: the ordered plugins the workspace uses,
 * `chain[0]` the primary. The PUT replaces the whole chain. Only installed plugins the workspace is
 * entitled to can join a chain, and a workspace session (a tenant's own admin) may put in only plugins
 * delegated to its tenant. Uninstalling a plugin takes it out of every chain. The public ui-chain route and
 * the sessions' plugin keys count only entries that are `active` and still entitled.
 *
 * The routes ask a `ChainTables` port (`chainTables` is the PostgreSQL one), so their rules are unit-tested
 * with the tables in memory.
 */
import { reachOf } from "@svc/access";
import type { Principal } from "@svc/bus";
import { type Db, type Queries, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import { audit, type HandlerWith, type RouteName } from "./common.js";
import {
  chainEntitled,
  type EntitlementDeps,
  entitlementOf,
  type GrantTable,
  grantTable,
  isDelegated,
  tenantOf,
} from "./entitlements.js";

/** One entry of a workspace's chain as stored, with whether it is entitled now. */
export interface ChainEntry {
  readonly pluginId: string;
  readonly version: string;
  readonly state: string;
  /** The tenant the workspace belonged to when the chain was put. */
  readonly tenantKey: string | null;
  readonly entitled: boolean;
  readonly assignedAt: Date;
}

/** What putting a chain asks of the tables, inside one change of one workspace's chain. */
export interface ChainChange {
  /** Which of `pluginIds` are installed (kept so until the change ends). */
  installed(pluginIds: readonly string[]): Promise<ReadonlySet<string>>;
  /** The chain's plugin ids as it stands, in order. */
  current(): Promise<string[]>;
  /** Whether the platform delegated the plugin to the tenant. */
  delegated(tenantKey: string, pluginId: string): Promise<boolean>;
  /** The grants, as this change sees them. */
  readonly grants: GrantTable;
  /** Replaces the chain. */
  replace(chain: readonly string[], tenantKey: string, assignedBy: string): Promise<void>;
}

/** The chains' tables. */
export interface ChainTables {
  /** The workspace's chain in order. */
  chain(workspaceKey: string): Promise<ChainEntry[]>;
  /** Runs `change` as one change of the workspace's chain: one at a time per workspace, across replicas. */
  change<T>(workspaceKey: string, change: (tables: ChainChange) => Promise<T>): Promise<T>;
  /** Records a chain change in the registry's audit. */
  audit(principal: Principal, action: string, workspaceKey: string): Promise<void>;
}

export interface ChainDeps extends Pick<EntitlementDeps, "tenancy" | "announce"> {
  readonly chains: ChainTables;
}

type Handler<K extends RouteName> = HandlerWith<ChainDeps, K>;

/** The PostgreSQL chain tables. */
export function chainTables(db: Db): ChainTables {
  return {
    async chain(workspaceKey) {
      const rows = await db.any<{
        plugin_id: string;
        version: string;
        state: string;
        tenant_key: string | null;
        entitled: boolean;
        assigned_at: Date;
      }>(sql`
        SELECT w.plugin_id, p.version, p.state, w.tenant_key, w.assigned_at, ${chainEntitled} AS entitled
        FROM plugin_registry.workspace_plugins w JOIN plugin_registry.plugins p USING (plugin_id)
        WHERE w.workspace_key = ${workspaceKey} ORDER BY w.position`);
      return rows.map((r) => ({
        pluginId: r.plugin_id,
        version: r.version,
        state: r.state,
        tenantKey: r.tenant_key,
        entitled: r.entitled,
        assignedAt: r.assigned_at,
      }));
    },
    change: (workspaceKey, change) =>
      db.transaction(async (tx) => {
        await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`chain:${workspaceKey}`}))`);
        return change({
          async installed(pluginIds) {
            const known = await tx.any<{ plugin_id: string }>(sql`
              SELECT plugin_id FROM plugin_registry.plugins WHERE plugin_id = ANY(${pluginIds}::text[]) FOR SHARE`);
            return new Set(known.map((r) => r.plugin_id));
          },
          async current() {
            const rows = await tx.any<{ plugin_id: string }>(sql`
              SELECT plugin_id FROM plugin_registry.workspace_plugins
              WHERE workspace_key = ${workspaceKey} ORDER BY position`);
            return rows.map((r) => r.plugin_id);
          },
          delegated: (tenantKey, pluginId) => isDelegated(tx, tenantKey, pluginId),
          grants: grantTable(tx),
          async replace(chain, tenantKey, assignedBy) {
            await tx.query(
              sql`DELETE FROM plugin_registry.workspace_plugins WHERE workspace_key = ${workspaceKey}`,
            );
            await tx.query(sql`
              INSERT INTO plugin_registry.workspace_plugins (workspace_key, plugin_id, position, tenant_key, assigned_by)
              SELECT ${workspaceKey}, id, ord - 1, ${tenantKey}, ${assignedBy}
              FROM unnest(${chain}::text[]) WITH ORDINALITY AS t(id, ord)`);
          },
        });
      }),
    audit: (principal, action, workspaceKey) => audit(db, principal, action, {}, undefined, workspaceKey),
  };
}

/**
 * The chain's answer. The tenant is the entries' (as assigned), else the workspace's own for an empty chain
 * (null for a workspace the resolver does not know).
 */
async function body(deps: Pick<ChainDeps, "tenancy">, workspaceKey: string, entries: readonly ChainEntry[]) {
  const tenantKey =
    entries[0]?.tenantKey ??
    (await tenantOf(deps, workspaceKey).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    }));
  return {
    workspaceKey,
    tenantKey,
    chain: entries.map((e, i) => ({
      pluginId: e.pluginId,
      version: e.version,
      state: e.state,
      entitled: e.entitled,
      position: i,
    })),
    updatedAtUtc:
      entries.length === 0
        ? null
        : new Date(Math.max(...entries.map((e) => e.assignedAt.getTime()))).toISOString(),
  };
}

export const getChain: Handler<"assignments.get"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  return { status: 200, body: await body(deps, wk, await deps.chains.chain(wk)) };
};

export const putChain: Handler<"assignments.put"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  const chain = req.body.chain;
  const tenantKey = await tenantOf(deps, wk);
  const tenantAdmin = reachOf(req.principal).kind === "workspace";
  await deps.chains.change(wk, async (t) => {
    const installed = await t.installed(chain);
    const violations: Array<{ field: string; message: string }> = [];
    // A workspace session changes only delegated entries: what the platform put in the
    // chain and never delegated stays, in the same order (and may stay although not delegated).
    const fixed: string[] = [];
    if (tenantAdmin) {
      for (const id of await t.current()) {
        if (!(await t.delegated(tenantKey, id))) fixed.push(id);
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
      } else if (!fixed.includes(id) && (await entitlementOf(t.grants, id, tenantKey, wk)).via === null) {
        violations.push({ field, message: `workspace '${wk}' is not entitled to plugin '${id}'` });
      } else if (tenantAdmin && !fixed.includes(id) && !(await t.delegated(tenantKey, id))) {
        violations.push({ field, message: `plugin '${id}' is not delegated to tenant '${tenantKey}'` });
      }
    }
    if (violations.length > 0) throw new ValidationError(violations);
    await t.replace(chain, tenantKey, req.principal.subject);
  });
  await deps.chains.audit(req.principal, `assign ${wk}: [${chain.join(", ")}]`, wk);
  // Followers fetch the whole set again: one nudge covers the plugins that joined and those that left.
  deps.announce(chain[0] ?? "");
  return { status: 200, body: await body(deps, wk, await deps.chains.chain(wk)) };
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
