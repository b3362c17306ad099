/**
 * Surfaces and snippets of a workspace. A surface (key `default` unless named) has an
 * application root: a navigation item (`key`, `title`, `path`, `visible`, `order`, `children`) whose
 * children the public navigation route lists, each with its full path. Snippets are named pieces of text
 * or HTML that surface templates use as `snippets.<key>`. The workspace is the session's own for a
 * workspace session; a platform session names it with `workspaceKey` (blank or absent: `default`).
 */
import { requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { NavItem } from "@svc/contracts";
import { type Queries, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import type { ResolverHandler } from "./deps.js";

/** The workspace a surface or snippet route means; 404 when it does not exist or is out of reach. */
async function workspaceOf(
  db: Queries,
  principal: Principal,
  requested: string | undefined,
): Promise<string> {
  const reach = requireReach(principal);
  const named = requested === undefined || requested.trim() === "" ? undefined : requested;
  let key: string;
  if (reach.kind === "workspace") {
    if (named !== undefined && named !== reach.workspaceKey) {
      throw new NotFoundError(`Workspace '${named}' was not found.`);
    }
    key = reach.workspaceKey;
  } else {
    key = named ?? "default";
  }
  const found = await db.maybeOne(sql`SELECT 1 AS one FROM resolver.workspaces WHERE key = ${key}`);
  if (found === null) throw new NotFoundError(`Workspace '${key}' was not found.`);
  return key;
}

interface SurfaceRow {
  workspace_key: string;
  surface_key: string;
  name: string;
  root: NavItem;
  updated_at: Date;
}

const surfaceView = (r: SurfaceRow) => ({
  workspaceKey: r.workspace_key,
  surfaceKey: r.surface_key,
  name: r.name,
  applicationRoot: r.root,
  updatedAtUtc: r.updated_at.toISOString(),
});

/** Checks a navigation tree: unique keys, at most 500 items. */
function checkTree(root: NavItem): void {
  const keys = new Set<string>();
  const violations: Array<{ field: string; message: string }> = [];
  let count = 0;
  const walk = (item: NavItem, at: string) => {
    count++;
    if (keys.has(item.key)) violations.push({ field: `${at}/key`, message: `'${item.key}' is used twice` });
    keys.add(item.key);
    (item.children ?? []).forEach((child, i) => walk(child, `${at}/children/${i}`));
  };
  walk(root, "/body/applicationRoot");
  if (count > 500) violations.push({ field: "/body/applicationRoot", message: "has more than 500 items" });
  if (violations.length > 0) throw new ValidationError(violations);
}

export const listSurfaces: ResolverHandler<"surfaces.list"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const rows = await deps.db.any<SurfaceRow>(
    sql`SELECT * FROM resolver.surfaces WHERE workspace_key = ${wk} ORDER BY surface_key`,
  );
  return { status: 200, body: { items: rows.map(surfaceView) } };
};

export const getSurface: ResolverHandler<"surfaces.get"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const row = await deps.db.maybeOne<SurfaceRow>(sql`
    SELECT * FROM resolver.surfaces WHERE workspace_key = ${wk} AND surface_key = ${req.params.surfaceKey}`);
  if (row === null) throw new NotFoundError(`Workspace '${wk}' has no surface '${req.params.surfaceKey}'.`);
  return { status: 200, body: surfaceView(row) };
};

export const putSurface: ResolverHandler<"surfaces.put"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const root = req.body.applicationRoot as NavItem;
  checkTree(root);
  const row = await deps.db.one<SurfaceRow & { inserted: boolean }>(sql`
    INSERT INTO resolver.surfaces (workspace_key, surface_key, name, root)
    VALUES (${wk}, ${req.params.surfaceKey}, ${req.body.name}, ${JSON.stringify(root)}::jsonb)
    ON CONFLICT (workspace_key, surface_key) DO UPDATE SET name = excluded.name, root = excluded.root, updated_at = now()
    RETURNING *, (xmax = 0) AS inserted`);
  return { status: row.inserted ? 201 : 200, body: surfaceView(row) };
};

export const deleteSurface: ResolverHandler<"surfaces.delete"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const gone = await deps.db.maybeOne(sql`
    DELETE FROM resolver.surfaces WHERE workspace_key = ${wk} AND surface_key = ${req.params.surfaceKey}
    RETURNING surface_key`);
  if (gone === null) throw new NotFoundError(`Workspace '${wk}' has no surface '${req.params.surfaceKey}'.`);
  return { status: 204 };
};

interface SnippetRow {
  workspace_key: string;
  snippet_key: string;
  content: string;
  content_type: "text/plain" | "text/html";
  updated_at: Date;
}

const snippetView = (r: SnippetRow) => ({
  workspaceKey: r.workspace_key,
  snippetKey: r.snippet_key,
  content: r.content,
  contentType: r.content_type,
  updatedAtUtc: r.updated_at.toISOString(),
});

export const listSnippets: ResolverHandler<"snippets.list"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const rows = await deps.db.any<SnippetRow>(
    sql`SELECT * FROM resolver.snippets WHERE workspace_key = ${wk} ORDER BY snippet_key`,
  );
  return { status: 200, body: { items: rows.map(snippetView) } };
};

export const putSnippet: ResolverHandler<"snippets.put"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const row = await deps.db.one<SnippetRow & { inserted: boolean }>(sql`
    INSERT INTO resolver.snippets (workspace_key, snippet_key, content, content_type)
    VALUES (${wk}, ${req.params.snippetKey}, ${req.body.content}, ${req.body.contentType ?? "text/plain"})
    ON CONFLICT (workspace_key, snippet_key) DO UPDATE SET
      content = excluded.content, content_type = excluded.content_type, updated_at = now()
    RETURNING *, (xmax = 0) AS inserted`);
  return { status: row.inserted ? 201 : 200, body: snippetView(row) };
};

export const deleteSnippet: ResolverHandler<"snippets.delete"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const gone = await deps.db.maybeOne(sql`
    DELETE FROM resolver.snippets WHERE workspace_key = ${wk} AND snippet_key = ${req.params.snippetKey}
    RETURNING snippet_key`);
  if (gone === null) throw new NotFoundError(`Workspace '${wk}' has no snippet '${req.params.snippetKey}'.`);
  return { status: 204 };
};
