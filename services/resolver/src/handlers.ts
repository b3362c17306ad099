import type { ResolveRequest, ResolveResult, TenancyLookupReply, TenancyLookupRequest } from "@svc/contracts";
import { type Queries, sql } from "@svc/db";
import { normaliseHost, normalisePath } from "@svc/workspace";

import { findVisibleWorkspace } from "./repository.js";

const UNRESOLVED: ResolveResult = Object.freeze({ resolved: false, workspaceKey: null });

/** What resolution and the tenancy lookup ask of the resolver's tables. */
export interface TenancyRepository {
  /** The key of the visible workspace bound to the (normalised) host whose prefix covers the path. */
  findVisible(host: string, path: string, defaultTenantKey: string | null): Promise<string | null>;
  /** Those of the keys that name a workspace, with its tenant and both states. */
  workspaces(keys: readonly string[]): Promise<TenancyLookupReply["workspaces"]>;
  /** Those of the keys that name a tenant. */
  tenants(keys: readonly string[]): Promise<string[]>;
}

/** The resolver's tables. */
export function tenancyTables(db: Queries): TenancyRepository {
  return {
    findVisible: (host, path, tenant) => findVisibleWorkspace(db, host, path, tenant),
    async workspaces(keys) {
      const rows = await db.any<{
        workspace_key: string;
        tenant_key: string;
        is_active: boolean;
        tenant_is_active: boolean;
      }>(sql`
        SELECT w.key AS workspace_key, w.tenant_key, w.is_active, t.is_active AS tenant_is_active
        FROM resolver.workspaces w JOIN resolver.tenants t ON t.key = w.tenant_key
        WHERE w.key = ANY(${[...keys]}::text[])`);
      return rows.map((w) => ({
        workspaceKey: w.workspace_key,
        tenantKey: w.tenant_key,
        isActive: w.is_active,
        tenantIsActive: w.tenant_is_active,
      }));
    },
    async tenants(keys) {
      const rows = await db.any<{ key: string }>(
        sql`SELECT key FROM resolver.tenants WHERE key = ANY(${[...keys]}::text[])`,
      );
      return rows.map((t) => t.key);
    },
  };
}

/**
 * `GET /workspace/public/resolve`: host and path normalised as the gateway does (this trusts no caller);
 * never fails for an unknown or unusable host, it answers unresolved.
 */
export async function resolveWorkspace(
  tables: TenancyRepository,
  defaultTenantKey: string | null,
  request: ResolveRequest,
): Promise<ResolveResult> {
  const host = normaliseHost(request.host);
  if (host === null) return UNRESOLVED;
  const key = await tables.findVisible(host, normalisePath(request.path), defaultTenantKey);
  return key === null ? UNRESOLVED : { resolved: true, workspaceKey: key };
}

/** The named workspaces that exist, with their tenant, and the named tenants that exist. */
export async function lookupTenancy(
  tables: TenancyRepository,
  request: TenancyLookupRequest,
): Promise<TenancyLookupReply> {
  const [workspaces, tenants] = await Promise.all([
    request.workspaceKeys.length === 0 ? [] : tables.workspaces(request.workspaceKeys),
    request.tenantKeys.length === 0 ? [] : tables.tenants(request.tenantKeys),
  ]);
  return { workspaces, tenants };
}
