/**
 * Tenants: create, list, read, activate, suspend, delete. A suspended tenant's
 * workspaces are invisible on every public route; the tables' change trigger tells every gateway to drop
 * its cached resolutions, within a second. Deleting a tenant that has workspaces needs
 * `deleteWorkspaces=true`: they are deleted with it (each publishing `workspace.deleted`, then the tenant
 * `tenant.deleted`, recorded with the change): the services that keep data per workspace or tenant follow
 * those events durably, so nothing is left dangling even when they were down.
 */
import { isUniqueViolation, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError } from "@svc/errors";

import type { ResolverHandler } from "./deps.js";

interface TenantRow {
  key: string;
  name: string;
  is_active: boolean;
  workspace_count: number;
  created_at: Date;
  updated_at: Date;
}

const TENANTS: Listing = { tag: "tenants", kinds: ["text"] };

const selectTenant = sql`
  SELECT t.*, (SELECT count(*)::int FROM resolver.workspaces w WHERE w.tenant_key = t.key) AS workspace_count
  FROM resolver.tenants t`;

const view = (r: TenantRow) => ({
  tenantKey: r.key,
  name: r.name,
  state: r.is_active ? ("active" as const) : ("suspended" as const),
  isActive: r.is_active,
  workspaceCount: r.workspace_count,
  createdAtUtc: r.created_at.toISOString(),
  updatedAtUtc: r.updated_at.toISOString(),
});

async function tenant(db: Queries, key: string): Promise<TenantRow> {
  const row = await db.maybeOne<TenantRow>(sql`${selectTenant} WHERE t.key = ${key}`);
  if (row === null) throw new NotFoundError(`Tenant '${key}' was not found.`);
  return row;
}

export const createTenant: ResolverHandler<"tenants.create"> = async (deps, req) => {
  try {
    await deps.db.query(
      sql`INSERT INTO resolver.tenants (key, name) VALUES (${req.body.tenantKey}, ${req.body.name})`,
    );
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`Tenant '${req.body.tenantKey}' exists already.`);
    throw error;
  }
  return {
    status: 201,
    headers: { location: `/api/tenants/${req.body.tenantKey}` },
    body: view(await tenant(deps.db, req.body.tenantKey)),
  };
};

export const listTenants: ResolverHandler<"tenants.list"> = async (deps, req) => {
  const { limit, after } = readPage(req.query, TENANTS);
  const rows = await deps.db.any<TenantRow>(sql`
    ${selectTenant} WHERE (${after?.[0] ?? null}::text IS NULL OR t.key > ${after?.[0] ?? null})
    ORDER BY t.key LIMIT ${limit + 1}`);
  return { status: 200, body: toPage(rows, limit, TENANTS, (r) => [r.key], view) };
};

export const getTenant: ResolverHandler<"tenants.get"> = async (deps, req) => ({
  status: 200,
  body: view(await tenant(deps.db, req.params.tenantKey)),
});

async function setActive(
  deps: Parameters<ResolverHandler<"tenants.activate">>[0],
  key: string,
  active: boolean,
) {
  const row = await deps.db.maybeOne(sql`
    UPDATE resolver.tenants SET is_active = ${active}, updated_at = now() WHERE key = ${key} RETURNING key`);
  if (row === null) throw new NotFoundError(`Tenant '${key}' was not found.`);
  return { status: 200, body: view(await tenant(deps.db, key)) };
}

export const activateTenant: ResolverHandler<"tenants.activate"> = (deps, req) =>
  setActive(deps, req.params.tenantKey, true);

export const suspendTenant: ResolverHandler<"tenants.suspend"> = (deps, req) =>
  setActive(deps, req.params.tenantKey, false);

export const deleteTenant: ResolverHandler<"tenants.delete"> = async (deps, req) => {
  const key = req.params.tenantKey;
  await deps.db.transaction(async (tx) => {
    const found = await tx.maybeOne(sql`SELECT key FROM resolver.tenants WHERE key = ${key} FOR UPDATE`);
    if (found === null) throw new NotFoundError(`Tenant '${key}' was not found.`);
    const owned = await tx.any<{ key: string }>(
      sql`SELECT key FROM resolver.workspaces WHERE tenant_key = ${key} ORDER BY key FOR UPDATE`,
    );
    if (owned.length > 0 && req.query.deleteWorkspaces !== true) {
      throw new SvcError(
        ErrorCode.Conflict,
        `Tenant '${key}' has ${owned.length} workspace(s): delete them first, or pass deleteWorkspaces=true.`,
        { extensions: { workspaceCount: owned.length } },
      );
    }
    for (const w of owned) {
      await deps.outbox.record(tx, "workspace.deleted", w.key, { workspaceKey: w.key, tenantKey: key });
    }
    await tx.query(sql`DELETE FROM resolver.tenants WHERE key = ${key}`);
    // The services that keep data per tenant (grants, delegations) follow this event durably.
    await deps.outbox.record(tx, "tenant.deleted", null, {
      tenantKey: key,
      workspaceKeys: owned.map((w) => w.key),
    });
    await tx.query(sql`
      DELETE FROM resolver.custom_field_values
      WHERE (entity_name = 'tenant' AND entity_id = ${key})
         OR (entity_name = 'workspace' AND entity_id = ANY(${owned.map((w) => w.key)}::text[]))`);
  });
  return { status: 204 };
};
