import type { ResolveRequest, ResolveResult, TenancyLookupReply, TenancyLookupRequest } from "@svc/contracts";
import { type Queries, sql } from "@svc/db";
import { ValidationError } from "@svc/errors";
import { MAX_HOST_LENGTH, MAX_PATH_LENGTH, normaliseHost, normalisePath } from "@svc/workspace";

import { findVisibleWorkspace, WORKSPACE_KEY } from "./repository.js";

const UNRESOLVED: ResolveResult = Object.freeze({ resolved: false, workspaceKey: null });

/** Checks the shape of a resolve request arriving over NATS (any client can send one). */
export function decodeResolveRequest(payload: unknown): ResolveRequest {
  const p = payload as Partial<Record<keyof ResolveRequest, unknown>>;
  const violations = [];
  if (typeof p?.host !== "string" || p.host.length > MAX_HOST_LENGTH) {
    violations.push({ field: "/host", message: `must be a string of at most ${MAX_HOST_LENGTH} characters` });
  }
  if (typeof p?.path !== "string" || p.path.length > MAX_PATH_LENGTH) {
    violations.push({ field: "/path", message: `must be a string of at most ${MAX_PATH_LENGTH} characters` });
  }
  if (violations.length > 0) throw new ValidationError(violations);
  return { host: p.host as string, path: p.path as string };
}

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

/** Checks a tenancy lookup: two lists of at most 500 keys each. */
export function decodeTenancyLookup(payload: unknown): TenancyLookupRequest {
  const p = (payload ?? {}) as Partial<Record<keyof TenancyLookupRequest, unknown>>;
  const list = (value: unknown, field: string): string[] => {
    if (value === undefined) return [];
    if (!Array.isArray(value) || value.length > 500 || value.some((v) => typeof v !== "string")) {
      throw new ValidationError([{ field, message: "must be an array of at most 500 strings" }]);
    }
    return (value as string[]).filter((v) => WORKSPACE_KEY.test(v));
  };
  return {
    workspaceKeys: list(p.workspaceKeys, "/workspaceKeys"),
    tenantKeys: list(p.tenantKeys, "/tenantKeys"),
  };
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
