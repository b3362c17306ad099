/**
 * Hosts per tenant: a host belongs to one tenant, and only that tenant's workspaces
 * bind paths under it. The platform assigns hosts (`PUT /api/tenants/{tenantKey}/hosts/{host}`), or a
 * platform session holding `tenant.update` binding a workspace to an unassigned host assigns it to the
 * workspace's tenant; any other session binds only hosts its tenant has. A refusal names nothing the
 * caller cannot see.
 *
 * The routes and the claim ask a `HostTables` port (`hostTables` is the PostgreSQL one), so their rules are
 * unit-tested with the tables in memory.
 */
import type { resolverRoutes, RouteHandlerWith } from "@svc/contracts";
import { type Db, type Queries, sql } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import { normaliseHost } from "@svc/workspace";

import { keyExists } from "./repository.js";

/** A host's assignment to a tenant. */
export interface HostAssignment {
  readonly host: string;
  readonly tenantKey: string;
  readonly createdAt: Date;
}

/**
 * What assigning and claiming hosts asks of the tables, inside one change: changes of the assignments are
 * serialised across replicas, so two tenants binding one new host at once cannot both get it.
 */
export interface HostChange {
  tenantExists(tenantKey: string): Promise<boolean>;
  /** The tenants `hosts` are assigned to, by host (an unassigned host is absent). */
  owners(hosts: readonly string[]): Promise<Map<string, string>>;
  /** Assigns to the tenant those of `hosts` that are unassigned; the assignments made. */
  assign(hosts: readonly string[], tenantKey: string): Promise<HostAssignment[]>;
  assignment(host: string): Promise<HostAssignment | null>;
  /** A workspace of the tenant with a path bound under the host, or null. */
  boundBy(host: string, tenantKey: string): Promise<string | null>;
  /** Takes the host from the tenant; whether the tenant had it. */
  release(host: string, tenantKey: string): Promise<boolean>;
}

/** The tenants' hosts. */
export interface HostTables {
  tenantExists(tenantKey: string): Promise<boolean>;
  /** The tenant's hosts, by name. */
  assignments(tenantKey: string): Promise<HostAssignment[]>;
  /** Runs `change` as one change of the assignments. */
  change<T>(change: (tables: HostChange) => Promise<T>): Promise<T>;
}

export interface HostDeps {
  readonly hosts: HostTables;
}

type Handler<K extends keyof typeof resolverRoutes> = RouteHandlerWith<HostDeps, (typeof resolverRoutes)[K]>;

interface HostRow {
  host: string;
  tenant_key: string;
  created_at: Date;
}

const assignmentOf = (r: HostRow): HostAssignment => ({
  host: r.host,
  tenantKey: r.tenant_key,
  createdAt: r.created_at,
});

const tenantExists = (db: Queries, tenantKey: string) => keyExists(db, "tenant", tenantKey);

/** Takes the lock that serialises changes of the host assignments, until `tx` ends. */
async function lockHostAssignments(tx: Queries): Promise<void> {
  await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext('resolver.tenant_hosts'))`);
}

/**
 * The assignments' tables inside the caller's transaction `tx`, once it holds the lock that serialises
 * their changes (taken here; held until `tx` ends).
 */
export async function lockedHostChange(tx: Queries): Promise<HostChange> {
  await lockHostAssignments(tx);
  return {
    tenantExists: (tenantKey) => tenantExists(tx, tenantKey),
    async owners(hosts) {
      const rows = await tx.any<{ host: string; tenant_key: string }>(sql`
        SELECT host, tenant_key FROM resolver.tenant_hosts WHERE host = ANY(${hosts}::text[])`);
      return new Map(rows.map((r) => [r.host, r.tenant_key]));
    },
    async assign(hosts, tenantKey) {
      const rows = await tx.any<HostRow>(sql`
        INSERT INTO resolver.tenant_hosts (host, tenant_key)
        SELECT h, ${tenantKey} FROM unnest(${hosts}::text[]) AS t(h) ON CONFLICT DO NOTHING RETURNING *`);
      return rows.map(assignmentOf);
    },
    async assignment(host) {
      const row = await tx.maybeOne<HostRow>(sql`SELECT * FROM resolver.tenant_hosts WHERE host = ${host}`);
      return row === null ? null : assignmentOf(row);
    },
    async boundBy(host, tenantKey) {
      const bound = await tx.maybeOne<{ workspace_key: string }>(sql`
        SELECT b.workspace_key FROM resolver.workspace_bindings b
        JOIN resolver.workspaces w ON w.key = b.workspace_key
        WHERE b.host = ${host} AND w.tenant_key = ${tenantKey} LIMIT 1`);
      return bound?.workspace_key ?? null;
    },
    async release(host, tenantKey) {
      const gone = await tx.maybeOne(sql`
        DELETE FROM resolver.tenant_hosts WHERE host = ${host} AND tenant_key = ${tenantKey} RETURNING 1 AS one`);
      return gone !== null;
    },
  };
}

/** The PostgreSQL host tables. */
export function hostTables(db: Db): HostTables {
  return {
    tenantExists: (tenantKey) => tenantExists(db, tenantKey),
    async assignments(tenantKey) {
      const rows = await db.any<HostRow>(
        sql`SELECT * FROM resolver.tenant_hosts WHERE tenant_key = ${tenantKey} ORDER BY host`,
      );
      return rows.map(assignmentOf);
    },
    change: (change) => db.transaction(async (tx) => change(await lockedHostChange(tx))),
  };
}

const view = (a: HostAssignment) => ({
  host: a.host,
  tenantKey: a.tenantKey,
  createdAtUtc: a.createdAt.toISOString(),
});

async function requireTenant(tables: Pick<HostTables, "tenantExists">, tenantKey: string): Promise<void> {
  if (!(await tables.tenantExists(tenantKey)))
    throw new NotFoundError(`Tenant '${tenantKey}' was not found.`);
}

function hostParam(raw: string): string {
  const host = normaliseHost(raw);
  if (host === null || host !== raw.trim().toLowerCase()) {
    throw new SvcError(ErrorCode.ValidationFailed, `'${raw}' is not a host name.`, {
      extensions: { errors: [{ field: "/params/host", message: "is not a host name" }] },
    });
  }
  return host;
}

export const listHosts: Handler<"tenant-hosts.list"> = async (deps, req) => {
  await requireTenant(deps.hosts, req.params.tenantKey);
  const items = await deps.hosts.assignments(req.params.tenantKey);
  return { status: 200, body: { tenantKey: req.params.tenantKey, items: items.map(view) } };
};

export const putHost: Handler<"tenant-hosts.put"> = async (deps, req) => {
  const host = hostParam(req.params.host);
  const { tenantKey } = req.params;
  return deps.hosts.change(async (tables) => {
    await requireTenant(tables, tenantKey);
    const [assigned] = await tables.assign([host], tenantKey);
    if (assigned !== undefined) {
      return {
        status: 201,
        headers: { location: `/api/tenants/${tenantKey}/hosts/${host}` },
        body: view(assigned),
      };
    }
    const existing = await tables.assignment(host);
    if (existing === null) throw new ConflictError(`Host '${host}' changed meanwhile; try again.`);
    if (existing.tenantKey !== tenantKey) {
      // Platform sessions only reach this route: naming the other tenant tells them nothing new.
      throw new ConflictError(`Host '${host}' is assigned to tenant '${existing.tenantKey}'.`);
    }
    return { status: 200, body: view(existing) };
  });
};

export const deleteHost: Handler<"tenant-hosts.delete"> = async (deps, req) => {
  const host = hostParam(req.params.host);
  const { tenantKey } = req.params;
  await deps.hosts.change(async (tables) => {
    const bound = await tables.boundBy(host, tenantKey);
    if (bound !== null) {
      throw new ConflictError(`Host '${host}' is bound by workspace '${bound}'; unbind it first.`);
    }
    if (!(await tables.release(host, tenantKey))) {
      throw new NotFoundError(`Tenant '${tenantKey}' has no host '${host}'.`);
    }
  });
  return { status: 204 };
};

/**
 * Checks that a workspace of `tenantKey` may bind `hosts` (inside the binding's change): each host
 * must be its tenant's; an unassigned host is assigned to it when the caller may assign hosts (a platform
 * session holding `tenant.update`), and refused otherwise. Another tenant's host is refused without
 * naming that tenant or its workspaces.
 */
export async function claimHosts(
  tables: HostChange,
  tenantKey: string,
  hosts: readonly string[],
  mayAssign: boolean,
): Promise<void> {
  const unique = [...new Set(hosts)];
  if (unique.length === 0) return;
  const owner = await tables.owners(unique);
  const violations: Array<{ field: string; message: string }> = [];
  for (const host of unique) {
    const tenant = owner.get(host);
    if (tenant === tenantKey) continue;
    if (tenant !== undefined || !mayAssign) {
      violations.push({
        field: "/body/bindings",
        message:
          tenant !== undefined
            ? `host '${host}' is not available to this tenant`
            : `host '${host}' is not assigned to tenant '${tenantKey}'; a platform operator with tenant.update assigns hosts`,
      });
    }
  }
  if (violations.length > 0) {
    throw new SvcError(ErrorCode.Conflict, violations.map((v) => v.message).join("; "), {
      extensions: { errors: violations },
    });
  }
  const unclaimed = unique.filter((h) => !owner.has(h));
  if (unclaimed.length > 0) await tables.assign(unclaimed, tenantKey);
}
