/**
 * What the public workspace routes read from the resolver: a visible workspace with
 * its route info, by host and path (longest path prefix wins) or by key, and a surface's navigation.
 * Visible: the workspace and its tenant are active and, with BackendHost:DefaultTenantKey set, it belongs
 * to that tenant. Requests arrive over NATS from any client: their shape is checked by the message contracts.
 */
import type {
  NavigationView,
  NavItem,
  PublicWorkspace,
  PublicWorkspaceRequest,
  SurfaceData,
} from "@svc/contracts";
import { type Queries, sql } from "@svc/db";
import { normaliseHost, normalisePath } from "@svc/workspace";

import { findVisibleByHost, visible, type VisibleWorkspaceRow, WORKSPACE_KEY } from "./repository.js";

/**
 * What the public routes ask of the resolver's tables. Visible: the workspace and its tenant are active
 * and, with a default tenant key (not null), the workspace belongs to it.
 */
export interface PublicRepository {
  /** The visible workspace of that key with its first binding (shortest path prefix, then host). */
  byKey(workspaceKey: string, defaultTenantKey: string | null): Promise<VisibleWorkspaceRow | null>;
  /** The visible workspace bound to the host whose path prefix is the longest covering the path. */
  byHost(host: string, path: string, defaultTenantKey: string | null): Promise<VisibleWorkspaceRow | null>;
  /** The root item of a workspace's surface; null when it has no such surface. */
  surfaceRoot(workspaceKey: string, surfaceKey: string): Promise<NavItem | null>;
  /** A workspace's snippets by key. */
  snippets(workspaceKey: string): Promise<SurfaceData["snippets"]>;
}

/** The resolver's tables. */
export function publicTables(db: Queries): PublicRepository {
  return {
    byKey: (workspaceKey, defaultTenantKey) =>
      db.maybeOne<VisibleWorkspaceRow>(sql`
        SELECT w.key, w.name, w.type, w.access_policy, w.tenant_key, w.public_base_url, b.host, b.path_prefix
        FROM resolver.workspaces w JOIN resolver.tenants t ON t.key = w.tenant_key
        LEFT JOIN LATERAL (
          SELECT host, path_prefix FROM resolver.workspace_bindings WHERE workspace_key = w.key
          ORDER BY length(path_prefix), host LIMIT 1) b ON true
        WHERE w.key = ${workspaceKey} AND ${visible(defaultTenantKey)}`),
    byHost: (host, path, defaultTenantKey) => findVisibleByHost(db, host, path, defaultTenantKey),
    surfaceRoot: async (workspaceKey, surfaceKey) =>
      (
        await db.maybeOne<{ root: NavItem }>(sql`
          SELECT root FROM resolver.surfaces
          WHERE workspace_key = ${workspaceKey} AND surface_key = ${surfaceKey}`)
      )?.root ?? null,
    snippets: async (workspaceKey) => {
      const rows = await db.any<{ snippet_key: string; content: string; content_type: string }>(sql`
        SELECT snippet_key, content, content_type FROM resolver.snippets WHERE workspace_key = ${workspaceKey}`);
      return Object.fromEntries(
        rows.map((r) => [r.snippet_key, { content: r.content, contentType: r.content_type }]),
      );
    },
  };
}

/** A visible workspace with its route: by key, or by host and path (the longest path prefix wins). */
export async function publicWorkspace(
  tables: PublicRepository,
  defaultTenantKey: string | null,
  request: PublicWorkspaceRequest,
): Promise<PublicWorkspace | null> {
  let row: VisibleWorkspaceRow | null;
  if ("workspaceKey" in request) {
    if (!WORKSPACE_KEY.test(request.workspaceKey)) return null;
    row = await tables.byKey(request.workspaceKey, defaultTenantKey);
  } else {
    const host = normaliseHost(request.host);
    if (host === null) return null;
    row = await tables.byHost(host, normalisePath(request.path), defaultTenantKey);
  }
  if (row === null) return null;
  return {
    workspace: { key: row.key, name: row.name, type: row.type },
    accessPolicy: row.access_policy,
    tenantKey: row.tenant_key,
    route: {
      publicBaseUrl: row.public_base_url,
      publicHost: row.host ?? "",
      publicPathPrefix: row.path_prefix ?? "/",
    },
  };
}

interface NavigationRequest {
  workspaceKey: string;
  surfaceKey: string;
  parentKey?: string;
  /** The path prefix the workspace was reached under (the matched binding's); default: its first binding's. */
  pathPrefix?: string;
}

const join = (base: string, segment: string) =>
  segment === "" ? base : `${base === "/" ? "" : base.replace(/\/$/, "")}/${segment}`;

/**
 * The navigation of a visible workspace's surface: the visible children of its application root (or of the
 * item `parentKey`), ordered by `order` then title, each with its full path: the path prefix the workspace
 * was reached under, the root's path, then each segment down to the item.
 */
export async function navigation(
  tables: PublicRepository,
  defaultTenantKey: string | null,
  request: NavigationRequest,
): Promise<NavigationView | null> {
  const ws = await publicWorkspace(tables, defaultTenantKey, { workspaceKey: request.workspaceKey });
  if (ws === null) return null;
  const root = await tables.surfaceRoot(request.workspaceKey, request.surfaceKey);
  if (root === null) return null;
  const rootPath = join(request.pathPrefix ?? ws.route.publicPathPrefix, root.path);
  let parent: NavItem | undefined = root;
  let parentPath = rootPath;
  if (request.parentKey !== undefined) {
    const find = (item: NavItem, path: string): [NavItem, string] | undefined => {
      for (const child of item.children ?? []) {
        const childPath = join(path, child.path);
        if (child.key === request.parentKey) return [child, childPath];
        const found = find(child, childPath);
        if (found) return found;
      }
      return undefined;
    };
    const found = find(root, rootPath);
    if (found === undefined) return null;
    [parent, parentPath] = found;
  }
  const items = (parent.children ?? [])
    .filter((c) => c.visible !== false)
    .map((c) => ({
      key: c.key,
      title: c.title,
      path: c.path,
      fullPath: join(parentPath, c.path),
      order: c.order ?? 0,
      hasChildren: (c.children ?? []).some((g) => g.visible !== false),
    }))
    .sort((a, b) => a.order - b.order || a.title.localeCompare(b.title));
  return { workspaceKey: request.workspaceKey, surfaceKey: request.surfaceKey, items };
}

/** The default surface's navigation (root children) and the snippets of a workspace, for rendering. */
export async function surfaceData(
  tables: PublicRepository,
  defaultTenantKey: string | null,
  request: { workspaceKey: string; pathPrefix: string },
): Promise<SurfaceData> {
  const nav = await navigation(tables, defaultTenantKey, {
    workspaceKey: request.workspaceKey,
    surfaceKey: "default",
    pathPrefix: request.pathPrefix,
  });
  return { navigation: nav?.items ?? [], snippets: await tables.snippets(request.workspaceKey) };
}
