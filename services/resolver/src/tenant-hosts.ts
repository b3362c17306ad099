/**
 * Hosts per tenant: a host belongs to one tenant, and only that tenant's workspaces
 * bind paths under it. The platform assigns hosts (`PUT /api/tenants/{tenantKey}/hosts/{host}`), or a
 * platform session binding a workspace to an unassigned host assigns it to the workspace's tenant; a
 * workspace session binds only hosts its tenant has. A refusal names nothing the caller cannot see.
 */
import { type Queries, sql } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import { normaliseHost } from "@svc/workspace";

import type { ResolverHandler } from "./deps.js";

interface HostRow {
  host: string;
  tenant_key: string;
  created_at: Date;
}

const view = (r: HostRow) => ({
  host: r.host,
  tenantKey: r.tenant_key,
  createdAtUtc: r.created_at.toISOString(),
});

async function requireTenant(db: Queries, tenantKey: string): Promise<void> {
  const found = await db.maybeOne(sql`SELECT 1 AS one FROM resolver.tenants WHERE key = ${tenantKey}`);
  if (found === null) throw new NotFoundError(`Tenant '${tenantKey}' was not found.`);
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

export const listHosts: ResolverHandler<"tenant-hosts.list"> = async (deps, req) => {
  await requireTenant(deps.db, req.params.tenantKey);
  const rows = await deps.db.any<HostRow>(
    sql`SELECT * FROM resolver.tenant_hosts WHERE tenant_key = ${req.params.tenantKey} ORDER BY host`,
  );
  return { status: 200, body: { tenantKey: req.params.tenantKey, items: rows.map(view) } };
};

export const putHost: ResolverHandler<"tenant-hosts.put"> = async (deps, req) => {
  const host = hostParam(req.params.host);
  const { tenantKey } = req.params;
  return deps.db.transaction(async (tx) => {
    await requireTenant(tx, tenantKey);
    const inserted = await tx.maybeOne<HostRow>(sql`
      INSERT INTO resolver.tenant_hosts (host, tenant_key) VALUES (${host}, ${tenantKey})
      ON CONFLICT (host) DO NOTHING RETURNING *`);
    if (inserted !== null) {
      return {
        status: 201,
        headers: { location: `/api/tenants/${tenantKey}/hosts/${host}` },
        body: view(inserted),
      };
    }
    const existing = await tx.one<HostRow>(sql`SELECT * FROM resolver.tenant_hosts WHERE host = ${host}`);
    if (existing.tenant_key !== tenantKey) {
      // Platform sessions only reach this route: naming the other tenant tells them nothing new.
      throw new ConflictError(`Host '${host}' is assigned to tenant '${existing.tenant_key}'.`);
    }
    return { status: 200, body: view(existing) };
  });
};

export const deleteHost: ResolverHandler<"tenant-hosts.delete"> = async (deps, req) => {
  const host = hostParam(req.params.host);
  const { tenantKey } = req.params;
  await deps.db.transaction(async (tx) => {
    const bound = await tx.maybeOne<{ workspace_key: string }>(sql`
      SELECT b.workspace_key FROM resolver.workspace_bindings b
      JOIN resolver.workspaces w ON w.key = b.workspace_key
      WHERE b.host = ${host} AND w.tenant_key = ${tenantKey} LIMIT 1`);
    if (bound !== null) {
      throw new ConflictError(
        `Host '${host}' is bound by workspace '${bound.workspace_key}'; unbind it first.`,
      );
    }
    const gone = await tx.maybeOne(sql`
      DELETE FROM resolver.tenant_hosts WHERE host = ${host} AND tenant_key = ${tenantKey} RETURNING 1 AS one`);
    if (gone === null) throw new NotFoundError(`Tenant '${tenantKey}' has no host '${host}'.`);
  });
  return { status: 204 };
};

/**
 * Checks that a workspace of `tenantKey` may bind `hosts` (inside the binding's transaction): each host
 * must be its tenant's; an unassigned host is assigned to it when the caller is a platform session, and
 * refused otherwise. Another tenant's host is refused without naming that tenant or its workspaces.
 */
export async function claimHosts(
  tx: Queries,
  tenantKey: string,
  hosts: readonly string[],
  platform: boolean,
): Promise<void> {
  const unique = [...new Set(hosts)];
  if (unique.length === 0) return;
  // Serialise claims of the same hosts: two tenants binding one new host at once cannot both get it.
  await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext('resolver.tenant_hosts'))`);
  const owned = await tx.any<{ host: string; tenant_key: string }>(sql`
    SELECT host, tenant_key FROM resolver.tenant_hosts WHERE host = ANY(${unique}::text[])`);
  const owner = new Map(owned.map((r) => [r.host, r.tenant_key]));
  const violations: Array<{ field: string; message: string }> = [];
  for (const host of unique) {
    const tenant = owner.get(host);
    if (tenant === tenantKey) continue;
    if (tenant !== undefined || !platform) {
      violations.push({
        field: "/body/bindings",
        message:
          tenant !== undefined
            ? `host '${host}' is not available to this tenant`
            : `host '${host}' is not assigned to tenant '${tenantKey}'; a platform operator assigns hosts`,
      });
    }
  }
  if (violations.length > 0) {
    throw new SvcError(ErrorCode.Conflict, violations.map((v) => v.message).join("; "), {
      extensions: { errors: violations },
    });
  }
  const unclaimed = unique.filter((h) => !owner.has(h));
  if (unclaimed.length > 0) {
    await tx.query(sql`
      INSERT INTO resolver.tenant_hosts (host, tenant_key)
      SELECT h, ${tenantKey} FROM unnest(${unclaimed}::text[]) AS t(h) ON CONFLICT DO NOTHING`);
  }
}
