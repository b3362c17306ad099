import { KEY_PATTERN } from "@svc/contracts";
import { type Queries, sql } from "@svc/db";

/** Whether the workspace (or the tenant) of that key exists, active or not. */
export async function keyExists(db: Queries, kind: "workspace" | "tenant", key: string): Promise<boolean> {
  const table = kind === "workspace" ? sql`resolver.workspaces` : sql`resolver.tenants`;
  return (await db.maybeOne(sql`SELECT 1 AS one FROM ${table} WHERE key = ${key}`)) !== null;
}

/** A well-formed workspace (or tenant) key. */
export const WORKSPACE_KEY = new RegExp(KEY_PATTERN);

/** A visible workspace with the binding it was found by (or its first binding, by key). */
export interface VisibleWorkspaceRow {
  key: string;
  name: string;
  type: string;
  access_policy: "Public" | "Authenticated";
  tenant_key: string;
  public_base_url: string | null;
  host: string | null;
  path_prefix: string | null;
}

/**
 * Visible: the workspace `w` and its tenant `t` are active and, when a default tenant key is
 * configured, the workspace belongs to it.
 */
export const visible = (defaultTenantKey: string | null) => sql`
  w.is_active AND t.is_active AND (${defaultTenantKey}::text IS NULL OR t.key = ${defaultTenantKey}::text)`;

/**
 * The visible workspace bound to this host whose path prefix is the longest one covering the path, with
 * that binding. Invisible workspaces are skipped, so a suspended workspace at `/shop` leaves `/shop` to
 * the workspace bound at `/`.
 */
export async function findVisibleByHost(
  db: Queries,
  host: string,
  path: string,
  defaultTenantKey: string | null,
): Promise<VisibleWorkspaceRow | null> {
  return db.maybeOne<VisibleWorkspaceRow>(sql`
    SELECT w.key, w.name, w.type, w.access_policy, w.tenant_key, w.public_base_url, b.host, b.path_prefix
    FROM resolver.workspace_bindings b
    JOIN resolver.workspaces w ON w.key = b.workspace_key
    JOIN resolver.tenants t ON t.key = w.tenant_key
    WHERE b.host = ${host} AND ${visible(defaultTenantKey)}
      AND (b.path_prefix = '/' OR b.path_prefix = ${path} OR starts_with(${path}, b.path_prefix || '/'))
    ORDER BY length(b.path_prefix) DESC
    LIMIT 1`);
}

/** The key of the workspace `findVisibleByHost` finds. */
export async function findVisibleWorkspace(
  db: Queries,
  host: string,
  path: string,
  defaultTenantKey: string | null,
): Promise<string | null> {
  return (await findVisibleByHost(db, host, path, defaultTenantKey))?.key ?? null;
}
