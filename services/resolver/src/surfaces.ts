/**
 * Surfaces and snippets of a workspace. A surface (key `default` unless named) has an
 * application root: a navigation item (`key`, `title`, `path`, `visible`, `order`, `children`) whose
 * children the public navigation route lists, each with its full path. Snippets are named pieces of text
 * or HTML that surface templates use as `snippets.<key>`. The workspace is the session's own for a
 * workspace session; a platform session names it with `workspaceKey` (blank or absent: `default`).
 *
 * The routes ask a `SurfaceTables` port (`surfaceTables` is the PostgreSQL one), so their rules are
 * unit-tested with the tables in memory.
 */
import { requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { NavItem, resolverRoutes, RouteHandlerWith } from "@svc/contracts";
import { type Queries, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import { keyExists } from "./repository.js";

/** A surface as stored. */
export interface Surface {
  readonly workspaceKey: string;
  readonly surfaceKey: string;
  readonly name: string;
  readonly root: NavItem;
  readonly updatedAt: Date;
}

/** A snippet as stored. */
export interface Snippet {
  readonly workspaceKey: string;
  readonly snippetKey: string;
  readonly content: string;
  readonly contentType: "text/plain" | "text/html";
  readonly updatedAt: Date;
}

/** The surfaces' and snippets' tables. */
export interface SurfaceTables {
  workspaceExists(workspaceKey: string): Promise<boolean>;
  /** The workspace's surfaces, by key. */
  surfaces(workspaceKey: string): Promise<Surface[]>;
  surface(workspaceKey: string, surfaceKey: string): Promise<Surface | null>;
  /** Creates or replaces a surface; whether it was created. */
  putSurface(
    surface: Omit<Surface, "updatedAt">,
  ): Promise<{ readonly stored: Surface; readonly created: boolean }>;
  /** Deletes a surface; whether there was one. */
  removeSurface(workspaceKey: string, surfaceKey: string): Promise<boolean>;
  /** The workspace's snippets, by key. */
  snippets(workspaceKey: string): Promise<Snippet[]>;
  /** Creates or replaces a snippet; whether it was created. */
  putSnippet(
    snippet: Omit<Snippet, "updatedAt">,
  ): Promise<{ readonly stored: Snippet; readonly created: boolean }>;
  /** Deletes a snippet; whether there was one. */
  removeSnippet(workspaceKey: string, snippetKey: string): Promise<boolean>;
}

export interface SurfaceDeps {
  readonly surfaces: SurfaceTables;
}

type Handler<K extends keyof typeof resolverRoutes> = RouteHandlerWith<
  SurfaceDeps,
  (typeof resolverRoutes)[K]
>;

interface SurfaceRow {
  workspace_key: string;
  surface_key: string;
  name: string;
  root: NavItem;
  updated_at: Date;
}

interface SnippetRow {
  workspace_key: string;
  snippet_key: string;
  content: string;
  content_type: "text/plain" | "text/html";
  updated_at: Date;
}

const surfaceOf = (r: SurfaceRow): Surface => ({
  workspaceKey: r.workspace_key,
  surfaceKey: r.surface_key,
  name: r.name,
  root: r.root,
  updatedAt: r.updated_at,
});

const snippetOf = (r: SnippetRow): Snippet => ({
  workspaceKey: r.workspace_key,
  snippetKey: r.snippet_key,
  content: r.content,
  contentType: r.content_type,
  updatedAt: r.updated_at,
});

/** The PostgreSQL surface tables. */
export function surfaceTables(db: Queries): SurfaceTables {
  return {
    workspaceExists: (workspaceKey) => keyExists(db, "workspace", workspaceKey),
    async surfaces(workspaceKey) {
      const rows = await db.any<SurfaceRow>(
        sql`SELECT * FROM resolver.surfaces WHERE workspace_key = ${workspaceKey} ORDER BY surface_key`,
      );
      return rows.map(surfaceOf);
    },
    async surface(workspaceKey, surfaceKey) {
      const row = await db.maybeOne<SurfaceRow>(sql`
        SELECT * FROM resolver.surfaces WHERE workspace_key = ${workspaceKey} AND surface_key = ${surfaceKey}`);
      return row === null ? null : surfaceOf(row);
    },
    async putSurface(s) {
      const row = await db.one<SurfaceRow & { inserted: boolean }>(sql`
        INSERT INTO resolver.surfaces (workspace_key, surface_key, name, root)
        VALUES (${s.workspaceKey}, ${s.surfaceKey}, ${s.name}, ${JSON.stringify(s.root)}::jsonb)
        ON CONFLICT (workspace_key, surface_key) DO UPDATE SET name = excluded.name, root = excluded.root, updated_at = now()
        RETURNING *, (xmax = 0) AS inserted`);
      return { stored: surfaceOf(row), created: row.inserted };
    },
    async removeSurface(workspaceKey, surfaceKey) {
      const gone = await db.maybeOne(sql`
        DELETE FROM resolver.surfaces WHERE workspace_key = ${workspaceKey} AND surface_key = ${surfaceKey}
        RETURNING surface_key`);
      return gone !== null;
    },
    async snippets(workspaceKey) {
      const rows = await db.any<SnippetRow>(
        sql`SELECT * FROM resolver.snippets WHERE workspace_key = ${workspaceKey} ORDER BY snippet_key`,
      );
      return rows.map(snippetOf);
    },
    async putSnippet(s) {
      const row = await db.one<SnippetRow & { inserted: boolean }>(sql`
        INSERT INTO resolver.snippets (workspace_key, snippet_key, content, content_type)
        VALUES (${s.workspaceKey}, ${s.snippetKey}, ${s.content}, ${s.contentType})
        ON CONFLICT (workspace_key, snippet_key) DO UPDATE SET
          content = excluded.content, content_type = excluded.content_type, updated_at = now()
        RETURNING *, (xmax = 0) AS inserted`);
      return { stored: snippetOf(row), created: row.inserted };
    },
    async removeSnippet(workspaceKey, snippetKey) {
      const gone = await db.maybeOne(sql`
        DELETE FROM resolver.snippets WHERE workspace_key = ${workspaceKey} AND snippet_key = ${snippetKey}
        RETURNING snippet_key`);
      return gone !== null;
    },
  };
}

/** The workspace a surface or snippet route means; 404 when it does not exist or is out of reach. */
async function workspaceOf(
  tables: SurfaceTables,
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
  if (!(await tables.workspaceExists(key))) throw new NotFoundError(`Workspace '${key}' was not found.`);
  return key;
}

const surfaceView = (s: Surface) => ({
  workspaceKey: s.workspaceKey,
  surfaceKey: s.surfaceKey,
  name: s.name,
  applicationRoot: s.root,
  updatedAtUtc: s.updatedAt.toISOString(),
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

export const listSurfaces: Handler<"surfaces.list"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  return { status: 200, body: { items: (await deps.surfaces.surfaces(wk)).map(surfaceView) } };
};

export const getSurface: Handler<"surfaces.get"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  const found = await deps.surfaces.surface(wk, req.params.surfaceKey);
  if (found === null) throw new NotFoundError(`Workspace '${wk}' has no surface '${req.params.surfaceKey}'.`);
  return { status: 200, body: surfaceView(found) };
};

export const putSurface: Handler<"surfaces.put"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  const root = req.body.applicationRoot as NavItem;
  checkTree(root);
  const { stored, created } = await deps.surfaces.putSurface({
    workspaceKey: wk,
    surfaceKey: req.params.surfaceKey,
    name: req.body.name,
    root,
  });
  return { status: created ? 201 : 200, body: surfaceView(stored) };
};

export const deleteSurface: Handler<"surfaces.delete"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  if (!(await deps.surfaces.removeSurface(wk, req.params.surfaceKey))) {
    throw new NotFoundError(`Workspace '${wk}' has no surface '${req.params.surfaceKey}'.`);
  }
  return { status: 204 };
};

const snippetView = (s: Snippet) => ({
  workspaceKey: s.workspaceKey,
  snippetKey: s.snippetKey,
  content: s.content,
  contentType: s.contentType,
  updatedAtUtc: s.updatedAt.toISOString(),
});

export const listSnippets: Handler<"snippets.list"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  return { status: 200, body: { items: (await deps.surfaces.snippets(wk)).map(snippetView) } };
};

export const putSnippet: Handler<"snippets.put"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  const { stored, created } = await deps.surfaces.putSnippet({
    workspaceKey: wk,
    snippetKey: req.params.snippetKey,
    content: req.body.content,
    contentType: req.body.contentType ?? "text/plain",
  });
  return { status: created ? 201 : 200, body: snippetView(stored) };
};

export const deleteSnippet: Handler<"snippets.delete"> = async (deps, req) => {
  const wk = await workspaceOf(deps.surfaces, req.principal, req.query.workspaceKey);
  if (!(await deps.surfaces.removeSnippet(wk, req.params.snippetKey))) {
    throw new NotFoundError(`Workspace '${wk}' has no snippet '${req.params.snippetKey}'.`);
  }
  return { status: 204 };
};
