/**
 * Tenants: create, list, read, activate, suspend, delete. A suspended tenant's
 * workspaces are invisible on every public route; the tables' change trigger tells every gateway to drop
 * its cached resolutions, within a second. Deleting a tenant that has workspaces needs
 * `deleteWorkspaces=true`: they are deleted with it (each publishing `workspace.deleted`, then the tenant
 * `tenant.deleted`, recorded with the change): the services that keep data per workspace or tenant follow
 * those events durably, so nothing is left dangling even when they were down.
 *
 * The routes ask a `TenantTables` port (`tenantTables` is the PostgreSQL one), so their rules are
 * unit-tested with the tables in memory.
 */
import type { PlatformEventData, resolverRoutes, RouteHandlerWith } from "@svc/contracts";
import { type Db, isUniqueViolation, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import type { Outbox } from "@svc/outbox";

import { deleteBytesAfterCommit, type MediaBytes } from "./media.js";

/** A tenant as stored, with how many workspaces it has. */
export interface Tenant {
  readonly key: string;
  readonly name: string;
  readonly isActive: boolean;
  readonly workspaceCount: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** What deleting a tenant asks of the tables, with the tenant and its workspaces locked until it ends. */
export interface TenantRemoval {
  /** The tenant's workspaces, by key; null when the tenant does not exist. */
  workspaces(): Promise<string[] | null>;
  /**
   * Deletes the tenant, its workspaces and what is kept for them (custom field values, media files'
   * records); the ids of the media files whose bytes are to go.
   */
  remove(workspaceKeys: readonly string[]): Promise<readonly string[]>;
  /** Records an event with the change, to be relayed once it commits. */
  record<N extends "workspace.deleted" | "tenant.deleted">(
    eventName: N,
    workspaceKey: string | null,
    data: PlatformEventData[N],
  ): Promise<void>;
}

/** The tenants' tables. */
export interface TenantTables {
  /** Creates a tenant; false when the key is taken. */
  create(key: string, name: string): Promise<boolean>;
  /** A page of tenants by key, after `after`: one more than `limit` when there are more. */
  page(after: string | null, limit: number): Promise<Tenant[]>;
  find(key: string): Promise<Tenant | null>;
  /** Turns the tenant on or off; false when it does not exist. */
  setActive(key: string, active: boolean): Promise<boolean>;
  /** Runs `removal` as one change that deletes the tenant `key`. */
  removal<T>(key: string, removal: (tables: TenantRemoval) => Promise<T>): Promise<T>;
}

export interface TenantDeps {
  readonly tenants: TenantTables;
  /** Its deleted workspaces' media files' bytes. */
  readonly mediaBytes: MediaBytes;
}

type Handler<K extends keyof typeof resolverRoutes> = RouteHandlerWith<
  TenantDeps,
  (typeof resolverRoutes)[K]
>;

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

const tenantOf = (r: TenantRow): Tenant => ({
  key: r.key,
  name: r.name,
  isActive: r.is_active,
  workspaceCount: r.workspace_count,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const findTenant = async (db: Queries, key: string) => {
  const row = await db.maybeOne<TenantRow>(sql`${selectTenant} WHERE t.key = ${key}`);
  return row === null ? null : tenantOf(row);
};

/** The PostgreSQL tenant tables; events go through `outbox`. */
export function tenantTables(db: Db, outbox: Outbox<PlatformEventData>): TenantTables {
  return {
    async create(key, name) {
      try {
        await db.query(sql`INSERT INTO resolver.tenants (key, name) VALUES (${key}, ${name})`);
        return true;
      } catch (error) {
        if (isUniqueViolation(error)) return false;
        throw error;
      }
    },
    async page(after, limit) {
      const rows = await db.any<TenantRow>(sql`
        ${selectTenant} WHERE (${after}::text IS NULL OR t.key > ${after})
        ORDER BY t.key LIMIT ${limit + 1}`);
      return rows.map(tenantOf);
    },
    find: (key) => findTenant(db, key),
    async setActive(key, active) {
      const row = await db.maybeOne(sql`
        UPDATE resolver.tenants SET is_active = ${active}, updated_at = now() WHERE key = ${key} RETURNING key`);
      return row !== null;
    },
    removal: (key, removal) =>
      db.transaction((tx) =>
        removal({
          async workspaces() {
            const found = await tx.maybeOne(
              sql`SELECT key FROM resolver.tenants WHERE key = ${key} FOR UPDATE`,
            );
            if (found === null) return null;
            const owned = await tx.any<{ key: string }>(
              sql`SELECT key FROM resolver.workspaces WHERE tenant_key = ${key} ORDER BY key FOR UPDATE`,
            );
            return owned.map((w) => w.key);
          },
          async remove(workspaceKeys) {
            const media = await tx.any<{ id: string }>(sql`
              DELETE FROM resolver.media WHERE workspace_key = ANY(${workspaceKeys}::text[]) RETURNING id`);
            await tx.query(sql`DELETE FROM resolver.tenants WHERE key = ${key}`);
            await tx.query(sql`
              DELETE FROM resolver.custom_field_values
              WHERE (entity_name = 'tenant' AND entity_id = ${key})
                 OR (entity_name = 'workspace' AND entity_id = ANY(${workspaceKeys}::text[]))`);
            return media.map((m) => m.id);
          },
          async record(eventName, workspaceKey, data) {
            await outbox.record(tx, eventName, workspaceKey, data);
          },
        }),
      ),
  };
}

const view = (t: Tenant) => ({
  tenantKey: t.key,
  name: t.name,
  state: t.isActive ? ("active" as const) : ("suspended" as const),
  isActive: t.isActive,
  workspaceCount: t.workspaceCount,
  createdAtUtc: t.createdAt.toISOString(),
  updatedAtUtc: t.updatedAt.toISOString(),
});

async function tenant(tables: TenantTables, key: string): Promise<Tenant> {
  const found = await tables.find(key);
  if (found === null) throw new NotFoundError(`Tenant '${key}' was not found.`);
  return found;
}

export const createTenant: Handler<"tenants.create"> = async (deps, req) => {
  if (!(await deps.tenants.create(req.body.tenantKey, req.body.name))) {
    throw new ConflictError(`Tenant '${req.body.tenantKey}' exists already.`);
  }
  return {
    status: 201,
    headers: { location: `/api/tenants/${req.body.tenantKey}` },
    body: view(await tenant(deps.tenants, req.body.tenantKey)),
  };
};

export const listTenants: Handler<"tenants.list"> = async (deps, req) => {
  const { limit, after } = readPage(req.query, TENANTS);
  const rows = await deps.tenants.page(after?.[0] ?? null, limit);
  return { status: 200, body: toPage(rows, limit, TENANTS, (t) => [t.key], view) };
};

export const getTenant: Handler<"tenants.get"> = async (deps, req) => ({
  status: 200,
  body: view(await tenant(deps.tenants, req.params.tenantKey)),
});

async function setActive(deps: TenantDeps, key: string, active: boolean) {
  if (!(await deps.tenants.setActive(key, active))) throw new NotFoundError(`Tenant '${key}' was not found.`);
  return { status: 200, body: view(await tenant(deps.tenants, key)) };
}

export const activateTenant: Handler<"tenants.activate"> = (deps, req) =>
  setActive(deps, req.params.tenantKey, true);

export const suspendTenant: Handler<"tenants.suspend"> = (deps, req) =>
  setActive(deps, req.params.tenantKey, false);

export const deleteTenant: Handler<"tenants.delete"> = async (deps, req) => {
  const key = req.params.tenantKey;
  const media = await deps.tenants.removal(key, async (tables) => {
    const owned = await tables.workspaces();
    if (owned === null) throw new NotFoundError(`Tenant '${key}' was not found.`);
    if (owned.length > 0 && req.query.deleteWorkspaces !== true) {
      throw new SvcError(
        ErrorCode.Conflict,
        `Tenant '${key}' has ${owned.length} workspace(s): delete them first, or pass deleteWorkspaces=true.`,
        { extensions: { workspaceCount: owned.length } },
      );
    }
    for (const workspaceKey of owned) {
      await tables.record("workspace.deleted", workspaceKey, { workspaceKey, tenantKey: key });
    }
    const media = await tables.remove(owned);
    // The services that keep data per tenant (grants, delegations) follow this event durably.
    await tables.record("tenant.deleted", null, { tenantKey: key, workspaceKeys: owned });
    return media;
  });
  // The workspaces' files' bytes go too, once the deletion is committed.
  deleteBytesAfterCommit(deps.mediaBytes, media);
  return { status: 204 };
};
