import type { ResolveRequest, ResolveResult, TenancyLookupReply, TenancyLookupRequest } from "@svc/contracts";
import { type Queries, sql } from "@svc/db";
import { normaliseHost, normalisePath } from "@svc/workspace";

import { findVisibleWorkspace } from "./repository.js";

const UNRESOLVED: ResolveResult = Object.freeze({ resolved: false, workspaceKey: null });

/** `GET /workspace/public/resolve`: never fails for an unknown host, it answers unresolved. */
export async function resolveWorkspace(
  db: Queries,
  defaultTenantKey: string | null,
  request: ResolveRequest,
): Promise<ResolveResult> {
  const host = normaliseHost(request.host);
  if (host === null) return UNRESOLVED;
  const key = await findVisibleWorkspace(db, host, normalisePath(request.path), defaultTenantKey);
  return key === null ? UNRESOLVED : { resolved: true, workspaceKey: key };
}

/** The named workspaces that exist, with their tenant, and the named tenants that exist. */
export async function lookupTenancy(db: Queries, request: TenancyLookupRequest): Promise<TenancyLookupReply> {
  const workspaces = await db.any<{
    workspace_key: string;
    tenant_key: string;
    is_active: boolean;
    tenant_is_active: boolean;
  }>(sql`
    SELECT w.key AS workspace_key, w.tenant_key, w.is_active, t.is_active AS tenant_is_active
    FROM resolver.workspaces w JOIN resolver.tenants t ON t.key = w.tenant_key
    WHERE w.key = ANY(${[...request.workspaceKeys]}::text[])`);
  const tenants = await db.any<{ key: string }>(
    sql`SELECT key FROM resolver.tenants WHERE key = ANY(${[...request.tenantKeys]}::text[])`,
  );
  return {
    workspaces: workspaces.map((w) => ({
      workspaceKey: w.workspace_key,
      tenantKey: w.tenant_key,
      isActive: w.is_active,
      tenantIsActive: w.tenant_is_active,
    })),
    tenants: tenants.map((t) => t.key),
  };
}
