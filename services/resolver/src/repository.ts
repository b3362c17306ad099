import { type Queries, sql } from "@svc/db";

/**
 * The visible workspace bound to this host whose path prefix is the longest one covering the path.
 * Visible (spec 2.1.2): the workspace and its tenant are active and, when a default tenant key is
 * configured, the workspace belongs to it. Invisible workspaces are skipped, so a suspended workspace at
 * `/shop` leaves `/shop` to the workspace bound at `/`.
 */
export async function findVisibleWorkspace(
  db: Queries,
  host: string,
  path: string,
  defaultTenantKey: string | null,
): Promise<string | null> {
  const row = await db.maybeOne<{ key: string }>(sql`
    SELECT w.key
    FROM resolver.workspace_bindings b
    JOIN resolver.workspaces w ON w.key = b.workspace_key
    JOIN resolver.tenants t ON t.key = w.tenant_key
    WHERE b.host = ${host}
      AND w.is_active AND t.is_active
      AND (${defaultTenantKey}::text IS NULL OR t.key = ${defaultTenantKey}::text)
      AND (b.path_prefix = '/' OR b.path_prefix = ${path} OR starts_with(${path}, b.path_prefix || '/'))
    ORDER BY length(b.path_prefix) DESC
    LIMIT 1`);
  return row?.key ?? null;
}
