/**
 * Entitlements and delegations (docs/plugins.md "Entitlements").
 *
 * A workspace may use an `application` plugin only while it is entitled: by a grant to the workspace or
 * to its tenant that has not expired. A `system` plugin is entitled everywhere. Grants come from operators
 * (PUT /api/entitlements, source `manual`) or from a sync (POST /api/entitlements/sync: the full list of
 * one source, e.g. a billing system, replaces that source's grants in one transaction). A chain may hold
 * only entitled plugins; when a grant goes, the plugin stays in the chain but counts for nothing (no
 * ui-chain entry, no session keys) until it is entitled again.
 *
 * A delegation lets a tenant's own workspace admins (workspace sessions holding plugin.assign) put a
 * plugin in their workspace's chain; platform operators may assign any entitled plugin.
 */
import type { TenancyLookupReply, TenancyLookupRequest } from "@svc/contracts";
import { type Db, join, type Listing, type Queries, readPage, type Sql, sql, toPage } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import type { HandlerWith, PluginDeps, RouteName } from "./common.js";

export interface EntitlementDeps extends PluginDeps {
  /** Which workspaces and tenants exist, and each workspace's tenant (the resolver owns them). */
  readonly tenancy: (request: TenancyLookupRequest) => Promise<TenancyLookupReply>;
  /** The grants (the registry's tables, `grantTable`). */
  readonly grants: GrantTable;
  /** Granting, syncing and delegating (`entitlementTables`). */
  readonly entitlements: EntitlementTables;
}

/** What deciding an entitlement asks of the registry's tables. */
export interface GrantTable {
  /** The installed plugin's tier (`system` or `application`), or null when it is not installed. */
  tier(pluginId: string): Promise<string | null>;
  /** The grants in force of the plugin to the tenant, or to the workspace (when one is named). */
  grantsInForce(
    pluginId: string,
    tenantKey: string,
    workspaceKey: string | null,
  ): Promise<Array<{ readonly subjectType: "tenant" | "workspace"; readonly expiresAt: Date | null }>>;
}

/** What the grant and delegation routes need: the resolver's tenancy, the tables, and telling the services. */
type AdminDeps = Pick<EntitlementDeps, "tenancy" | "entitlements" | "announce">;
type Handler<K extends RouteName> = HandlerWith<AdminDeps, K>;

const GRANTS: Listing = { tag: "entitlements", kinds: ["text", "text", "text"] };

type Via = "workspace" | "tenant" | "system" | null;

/** The SQL condition "grant `e` is in force". */
const inForce = sql`(e.expires_at IS NULL OR e.expires_at > now())`;

/** The registry's tables (in the caller's transaction, when it passes one). */
export function grantTable(db: Queries): GrantTable {
  return {
    async tier(pluginId) {
      const row = await db.maybeOne<{ tier: string }>(
        sql`SELECT tier FROM plugin_registry.plugins WHERE plugin_id = ${pluginId}`,
      );
      return row?.tier ?? null;
    },
    async grantsInForce(pluginId, tenantKey, workspaceKey) {
      const rows = await db.any<{ subject_type: "tenant" | "workspace"; expires_at: Date | null }>(sql`
        SELECT e.subject_type, e.expires_at FROM plugin_registry.entitlements e
        WHERE e.plugin_id = ${pluginId} AND ${inForce}
          AND ((e.subject_type = 'tenant' AND e.subject_key = ${tenantKey})
            OR (e.subject_type = 'workspace' AND e.subject_key = ${workspaceKey ?? ""}))`);
      return rows.map((r) => ({ subjectType: r.subject_type, expiresAt: r.expires_at }));
    },
  };
}

/**
 * How `pluginId` is entitled for a workspace of `tenantKey` (or the tenant alone, workspace null): a
 * system plugin everywhere; else a grant to the workspace before one to its tenant.
 */
export async function entitlementOf(
  grants: GrantTable,
  pluginId: string,
  tenantKey: string,
  workspaceKey: string | null,
): Promise<{ via: Via; expiresAt: Date | null }> {
  if ((await grants.tier(pluginId)) === "system") return { via: "system", expiresAt: null };
  const found = await grants.grantsInForce(pluginId, tenantKey, workspaceKey);
  const grant =
    found.find((g) => g.subjectType === "workspace") ?? found.find((g) => g.subjectType === "tenant");
  return grant === undefined
    ? { via: null, expiresAt: null }
    : { via: grant.subjectType, expiresAt: grant.expiresAt };
}

/** The tenant of a workspace; 404 when the resolver does not know it. */
export async function tenantOf(
  deps: Pick<EntitlementDeps, "tenancy">,
  workspaceKey: string,
): Promise<string> {
  const found = await deps.tenancy({ workspaceKeys: [workspaceKey], tenantKeys: [] });
  const tenant = found.workspaces.find((w) => w.workspaceKey === workspaceKey)?.tenantKey;
  if (tenant === undefined) throw new NotFoundError(`Workspace '${workspaceKey}' was not found.`);
  return tenant;
}

async function assertTenant(deps: Pick<EntitlementDeps, "tenancy">, tenantKey: string): Promise<void> {
  const found = await deps.tenancy({ workspaceKeys: [], tenantKeys: [tenantKey] });
  if (!found.tenants.includes(tenantKey)) throw new NotFoundError(`Tenant '${tenantKey}' was not found.`);
}

/** What the two entitlement questions need: the resolver's tenancy and the grants. */
type GrantDeps = Pick<EntitlementDeps, "tenancy" | "grants">;

export const workspaceEntitlement: HandlerWith<GrantDeps, "entitlements.workspace"> = async (deps, req) => {
  const { workspaceKey, pluginId } = req.params;
  const tenantKey = await tenantOf(deps, workspaceKey);
  const { via, expiresAt } = await entitlementOf(deps.grants, pluginId, tenantKey, workspaceKey);
  return {
    status: 200,
    body: {
      workspaceKey,
      tenantKey,
      pluginId,
      entitled: via !== null,
      via,
      expiresAtUtc: expiresAt?.toISOString() ?? null,
    },
  };
};

export const tenantEntitlement: HandlerWith<GrantDeps, "entitlements.tenant"> = async (deps, req) => {
  const { tenantId: tenantKey, pluginId } = req.params;
  await assertTenant(deps, tenantKey);
  const { via, expiresAt } = await entitlementOf(deps.grants, pluginId, tenantKey, null);
  return {
    status: 200,
    body: {
      tenantKey,
      pluginId,
      entitled: via !== null,
      via,
      expiresAtUtc: expiresAt?.toISOString() ?? null,
    },
  };
};

export interface GrantRow {
  subject_type: "tenant" | "workspace";
  subject_key: string;
  plugin_id: string;
  source: string;
  expires_at: Date | null;
  granted_by: string;
  granted_at: Date;
}

/** A grant to write: a tenant or a workspace, a plugin, until when (null: no end). */
export interface GrantRecord {
  readonly type: "tenant" | "workspace";
  readonly key: string;
  readonly pluginId: string;
  readonly expiresAt: string | null;
}

export interface DelegationRow {
  tenant_key: string;
  plugin_id: string;
  delegated_by: string;
  delegated_at: Date;
}

/** What the grant and delegation routes ask of the registry's tables (the rules stay in the handlers). */
export interface EntitlementTables {
  /** Grants by (subject type, subject key, plugin), after the page's cursor, one more than the limit. */
  page(
    filter: { tenantKey?: string; workspaceKey?: string; pluginId?: string; source?: string },
    page: ReturnType<typeof readPage>,
  ): Promise<GrantRow[]>;
  /**
   * Grants (source `manual`, by `by`, replacing a grant of any source to the same subject and plugin) and
   * withdraws, in one change; how many grants were withdrawn.
   */
  change(grant: readonly GrantRecord[], withdraw: readonly GrantRecord[], by: string): Promise<number>;
  /**
   * Makes `grants` the whole of `source`'s grants, in one change and one sync per source at a time: a
   * grant another source (or an operator) made stays theirs, a sync only adds what nobody granted.
   */
  sync(
    source: string,
    grants: readonly GrantRecord[],
    by: string,
  ): Promise<{ added: number; removed: number; kept: number }>;
  /** A tenant's delegations, by plugin. */
  delegations(tenantKey: string): Promise<DelegationRow[]>;
  /** Delegates an installed plugin (again: by `by`, now); null when the plugin is not installed. */
  delegate(tenantKey: string, pluginId: string, by: string): Promise<DelegationRow | null>;
  undelegate(tenantKey: string, pluginId: string): Promise<void>;
}

const unnest = (rows: readonly GrantRecord[]) => sql`
  unnest(${rows.map((r) => r.type)}::text[], ${rows.map((r) => r.key)}::text[], ${rows.map((r) => r.pluginId)}::text[],
         ${rows.map((r) => r.expiresAt)}::timestamptz[]) AS t(subject_type, subject_key, plugin_id, expires_at)`;

/** The grant and delegation tables in PostgreSQL. */
export function entitlementTables(db: Db): EntitlementTables {
  return {
    page: (q, { limit, after }) => {
      const conditions = [
        q.tenantKey === undefined
          ? sql`true`
          : sql`(subject_type = 'tenant' AND subject_key = ${q.tenantKey})`,
        q.workspaceKey === undefined
          ? sql`true`
          : sql`(subject_type = 'workspace' AND subject_key = ${q.workspaceKey})`,
        q.pluginId === undefined ? sql`true` : sql`plugin_id = ${q.pluginId}`,
        q.source === undefined ? sql`true` : sql`source = ${q.source}`,
        after === null
          ? sql`true`
          : sql`(subject_type, subject_key, plugin_id) > (${after[0]}, ${after[1]}, ${after[2]})`,
      ];
      return db.any<GrantRow>(sql`
        SELECT * FROM plugin_registry.entitlements
        WHERE ${join(conditions, " AND ")}
        ORDER BY subject_type, subject_key, plugin_id LIMIT ${limit + 1}`);
    },
    change: (grant, withdraw, by) =>
      db.transaction(async (tx) => {
        await tx.query(sql`
          INSERT INTO plugin_registry.entitlements (subject_type, subject_key, plugin_id, expires_at, source, granted_by)
          SELECT subject_type, subject_key, plugin_id, expires_at, 'manual', ${by} FROM ${unnest(grant)}
          ON CONFLICT (subject_type, subject_key, plugin_id) DO UPDATE SET
            expires_at = excluded.expires_at, source = 'manual', granted_by = excluded.granted_by, granted_at = now()`);
        const gone = await tx.any(sql`
          DELETE FROM plugin_registry.entitlements e USING ${unnest(withdraw)}
          WHERE e.subject_type = t.subject_type AND e.subject_key = t.subject_key AND e.plugin_id = t.plugin_id
          RETURNING 1 AS one`);
        return gone.length;
      }),
    sync: (source, grants, by) =>
      db.transaction(async (tx) => {
        await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`entitlements:${source}`}))`);
        const before = await tx.any(sql`
          SELECT 1 AS one FROM plugin_registry.entitlements WHERE source = ${source}`);
        const removed = await tx.any(sql`
          DELETE FROM plugin_registry.entitlements e
          WHERE e.source = ${source}
            AND (e.subject_type, e.subject_key, e.plugin_id) NOT IN (
              SELECT subject_type, subject_key, plugin_id FROM ${unnest(grants)})
          RETURNING 1 AS one`);
        const added = await tx.any<{ inserted: boolean }>(sql`
          INSERT INTO plugin_registry.entitlements (subject_type, subject_key, plugin_id, expires_at, source, granted_by)
          SELECT DISTINCT ON (subject_type, subject_key, plugin_id) subject_type, subject_key, plugin_id, expires_at, ${source}, ${by}
          FROM ${unnest(grants)}
          ON CONFLICT (subject_type, subject_key, plugin_id) DO UPDATE SET expires_at = excluded.expires_at
            WHERE plugin_registry.entitlements.source = ${source}
          RETURNING (xmax = 0) AS inserted`);
        return {
          added: added.filter((r) => r.inserted).length,
          removed: removed.length,
          kept: before.length - removed.length,
        };
      }),
    delegations: (tenantKey) =>
      db.any<DelegationRow>(
        sql`SELECT * FROM plugin_registry.delegations WHERE tenant_key = ${tenantKey} ORDER BY plugin_id`,
      ),
    delegate: (tenantKey, pluginId, by) =>
      db.maybeOne<DelegationRow>(sql`
        INSERT INTO plugin_registry.delegations (tenant_key, plugin_id, delegated_by)
        SELECT ${tenantKey}, ${pluginId}, ${by}
        WHERE EXISTS (SELECT 1 FROM plugin_registry.plugins WHERE plugin_id = ${pluginId})
        ON CONFLICT (tenant_key, plugin_id) DO UPDATE SET delegated_by = excluded.delegated_by, delegated_at = now()
        RETURNING *`),
    undelegate: async (tenantKey, pluginId) => {
      await db.query(
        sql`DELETE FROM plugin_registry.delegations WHERE tenant_key = ${tenantKey} AND plugin_id = ${pluginId}`,
      );
    },
  };
}

export const listEntitlements: Handler<"entitlements.list"> = async (deps, req) => {
  const q = req.query;
  const page = readPage(q, GRANTS);
  const { limit } = page;
  const rows = await deps.entitlements.page(
    {
      ...(q.tenantKey === undefined ? {} : { tenantKey: q.tenantKey }),
      ...(q.workspaceKey === undefined ? {} : { workspaceKey: q.workspaceKey }),
      ...(q.pluginId === undefined ? {} : { pluginId: q.pluginId }),
      ...(q.source === undefined ? {} : { source: q.source }),
    },
    page,
  );
  return {
    status: 200,
    body: toPage(
      rows,
      limit,
      GRANTS,
      (r) => [r.subject_type, r.subject_key, r.plugin_id],
      (r) => ({
        tenantKey: r.subject_type === "tenant" ? r.subject_key : null,
        workspaceKey: r.subject_type === "workspace" ? r.subject_key : null,
        pluginId: r.plugin_id,
        source: r.source,
        expiresAtUtc: r.expires_at?.toISOString() ?? null,
        grantedBy: r.granted_by,
        grantedAtUtc: r.granted_at.toISOString(),
      }),
    ),
  };
};

interface Grantee {
  readonly tenantKey?: string;
  readonly workspaceKey?: string;
  readonly pluginId: string;
  readonly expiresAtUtc?: string | null;
}

/** Checks that each grant names exactly one tenant or workspace, that exists; the subjects, in order. */
async function subjects(
  deps: Pick<EntitlementDeps, "tenancy">,
  items: readonly Grantee[],
): Promise<GrantRecord[]> {
  const violations: Array<{ field: string; message: string }> = [];
  items.forEach((item, i) => {
    if ((item.tenantKey === undefined) === (item.workspaceKey === undefined)) {
      violations.push({
        field: `/body/items/${i}`,
        message: "names exactly one of tenantKey and workspaceKey",
      });
    }
    if (item.expiresAtUtc != null && Number.isNaN(Date.parse(item.expiresAtUtc))) {
      violations.push({ field: `/body/items/${i}/expiresAtUtc`, message: "is not a date-time" });
    }
  });
  if (violations.length > 0) throw new ValidationError(violations);
  const found = await deps.tenancy({
    workspaceKeys: [...new Set(items.flatMap((i) => (i.workspaceKey ? [i.workspaceKey] : [])))],
    tenantKeys: [...new Set(items.flatMap((i) => (i.tenantKey ? [i.tenantKey] : [])))],
  });
  const workspaces = new Set(found.workspaces.map((w) => w.workspaceKey));
  const tenants = new Set(found.tenants);
  items.forEach((item, i) => {
    if (item.workspaceKey !== undefined && !workspaces.has(item.workspaceKey)) {
      violations.push({
        field: `/body/items/${i}/workspaceKey`,
        message: `workspace '${item.workspaceKey}' does not exist`,
      });
    }
    if (item.tenantKey !== undefined && !tenants.has(item.tenantKey)) {
      violations.push({
        field: `/body/items/${i}/tenantKey`,
        message: `tenant '${item.tenantKey}' does not exist`,
      });
    }
  });
  if (violations.length > 0) throw new ValidationError(violations);
  return items.map((item) => ({
    type: item.tenantKey !== undefined ? ("tenant" as const) : ("workspace" as const),
    key: (item.tenantKey ?? item.workspaceKey) as string,
    pluginId: item.pluginId,
    expiresAt: item.expiresAtUtc ?? null,
  }));
}

export const putEntitlements: Handler<"entitlements.put"> = async (deps, req) => {
  const items = req.body.items;
  const rows = await subjects(deps, items);
  const grant = rows.filter((_r, i) => items[i]?.entitled === true);
  const withdraw = rows.filter((_r, i) => items[i]?.entitled === false);
  const withdrawn = await deps.entitlements.change(grant, withdraw, req.principal.subject);
  deps.announce("");
  return { status: 200, body: { granted: grant.length, withdrawn } };
};

export const syncEntitlements: Handler<"entitlements.sync"> = async (deps, req) => {
  const { source, items } = req.body;
  if (source === "manual") {
    throw new ValidationError([
      { field: "/body/source", message: "'manual' is the source of PUT /api/entitlements" },
    ]);
  }
  const rows = items.length === 0 ? [] : await subjects(deps, items);
  const result = await deps.entitlements.sync(source, rows, req.principal.subject);
  deps.announce("");
  return { status: 200, body: { source, ...result } };
};

export const listDelegations: Handler<"delegations.list"> = async (deps, req) => {
  const tenantKey = req.params.tenantKey;
  await assertTenant(deps, tenantKey);
  const rows = await deps.entitlements.delegations(tenantKey);
  return {
    status: 200,
    body: {
      tenantKey,
      items: rows.map((r) => ({
        tenantKey,
        pluginId: r.plugin_id,
        delegated: true,
        delegatedBy: r.delegated_by,
        delegatedAtUtc: r.delegated_at.toISOString(),
      })),
    },
  };
};

export const putDelegation: Handler<"delegations.put"> = async (deps, req) => {
  const { tenantKey, pluginId } = req.params;
  await assertTenant(deps, tenantKey);
  if (!req.body.delegated) {
    await deps.entitlements.undelegate(tenantKey, pluginId);
    return {
      status: 200,
      body: { tenantKey, pluginId, delegated: false, delegatedBy: null, delegatedAtUtc: null },
    };
  }
  const row = await deps.entitlements.delegate(tenantKey, pluginId, req.principal.subject);
  if (row === null) throw new NotFoundError(`Plugin '${pluginId}' is not installed.`);
  return {
    status: 200,
    body: {
      tenantKey,
      pluginId,
      delegated: true,
      delegatedBy: row.delegated_by,
      delegatedAtUtc: row.delegated_at.toISOString(),
    },
  };
};

/** Whether `pluginId` is delegated to `tenantKey`. */
export async function isDelegated(db: Queries, tenantKey: string, pluginId: string): Promise<boolean> {
  return (
    (await db.maybeOne(
      sql`SELECT 1 AS one FROM plugin_registry.delegations WHERE tenant_key = ${tenantKey} AND plugin_id = ${pluginId}`,
    )) !== null
  );
}

/** The SQL condition "chain entry `w` (of plugin `p`) is entitled now", for the chain and its readers. */
export const chainEntitled = sql`(p.tier = 'system' OR EXISTS (
  SELECT 1 FROM plugin_registry.entitlements e
  WHERE e.plugin_id = w.plugin_id AND ${inForce}
    AND ((e.subject_type = 'workspace' AND e.subject_key = w.workspace_key)
      OR (e.subject_type = 'tenant' AND e.subject_key = w.tenant_key))))`;

/** Whether workspace `workspaceKey`'s chain holds the plugin while it is entitled there. */
export async function inEntitledChain(db: Queries, pluginId: string, workspaceKey: string): Promise<boolean> {
  return (
    (await db.maybeOne(sql`
      SELECT 1 AS one FROM plugin_registry.workspace_plugins w JOIN plugin_registry.plugins p USING (plugin_id)
      WHERE w.plugin_id = ${pluginId} AND w.workspace_key = ${workspaceKey} AND ${chainEntitled}`)) !== null
  );
}

/**
 * A workspace was created (`workspace.created`): a chain or theme kept under its key for another tenant (a
 * workspace of the same key deleted while the registry missed it) is not its own, and goes. Returns how
 * many rows went.
 */
export function forgetForeign(db: Db, workspaceKey: string, tenantKey: string): Promise<number> {
  return deleteRows(db, [
    sql`DELETE FROM plugin_registry.workspace_plugins WHERE workspace_key = ${workspaceKey} AND tenant_key <> ${tenantKey}`,
    sql`DELETE FROM plugin_registry.workspace_themes WHERE workspace_key = ${workspaceKey} AND tenant_key <> ${tenantKey}`,
  ]);
}

/** Runs the deletes in one transaction; returns how many rows went. */
function deleteRows(db: Db, statements: readonly Sql[]): Promise<number> {
  return db.transaction(async (tx) => {
    let deleted = 0;
    for (const statement of statements) deleted += (await tx.query(statement)).rowCount ?? 0;
    return deleted;
  });
}

/**
 * Workspaces or tenants were deleted (the resolver's `workspace.deleted` and `tenant.deleted`): their
 * chains, theme choices and values, grants and delegations go too. Returns how many rows went (0 on the
 * replicas that came second).
 */
export async function forgetDeleted(
  db: Db,
  workspaceKeys: readonly string[],
  tenantKeys: readonly string[],
): Promise<number> {
  const wks = [...workspaceKeys];
  const tks = [...tenantKeys];
  return deleteRows(db, [
    sql`DELETE FROM plugin_registry.workspace_plugins WHERE workspace_key = ANY(${wks}::text[])`,
    sql`DELETE FROM plugin_registry.workspace_themes WHERE workspace_key = ANY(${wks}::text[])`,
    sql`DELETE FROM plugin_registry.theme_values WHERE workspace_key = ANY(${wks}::text[])`,
    sql`
      DELETE FROM plugin_registry.entitlements
      WHERE (subject_type = 'workspace' AND subject_key = ANY(${wks}::text[]))
         OR (subject_type = 'tenant' AND subject_key = ANY(${tks}::text[]))`,
    sql`DELETE FROM plugin_registry.delegations WHERE tenant_key = ANY(${tks}::text[])`,
  ]);
}
