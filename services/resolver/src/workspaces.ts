/**
 * Workspaces: list, read, create or replace with PUT, delete. A workspace has a name, a
 * type, a tenant, an active flag, an access policy (`Public`, the default, or `Authenticated`), host
 * bindings with path prefixes and a public base URL. Hosts and prefixes are normalised as resolution reads
 * them; a host+prefix pair belongs to one workspace (409 naming it). Creating is for platform sessions (a
 * workspace session reaches only its own, existing workspace); a workspace's tenant does not change.
 * `workspace.created`, `workspace.updated` and `workspace.deleted` are recorded with the change.
 *
 * The routes ask a `WorkspaceTables` port (`workspaceTables` is the PostgreSQL one), so their rules are
 * unit-tested with the tables in memory.
 */
import { hasPermission, reachOf, requireReach } from "@svc/access";
import type { PlatformEventData, resolverRoutes, RouteHandlerWith } from "@svc/contracts";
import { type Db, isForeignKeyViolation, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";
import type { Outbox } from "@svc/outbox";
import { normaliseHost } from "@svc/workspace";

import { deleteBytesAfterCommit, type MediaBytes } from "./media.js";
import { claimHosts, type HostChange, lockedHostChange } from "./tenant-hosts.js";

/** A binding: a host and a path prefix under it. */
export interface WorkspaceBinding {
  readonly host: string;
  readonly pathPrefix: string;
}

/** A workspace as stored. */
export interface Workspace {
  readonly key: string;
  readonly tenantKey: string;
  readonly name: string;
  readonly type: string;
  readonly isActive: boolean;
  readonly accessPolicy: "Public" | "Authenticated";
  readonly publicBaseUrl: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** By host, then path prefix. */
  readonly bindings: readonly WorkspaceBinding[];
}

/** What a PUT writes: `isActive` undefined keeps an existing workspace's flag (a new one is active). */
export interface WorkspaceFields {
  readonly tenantKey: string;
  readonly name: string;
  readonly type: string;
  readonly isActive: boolean | undefined;
  readonly accessPolicy: "Public" | "Authenticated";
  readonly publicBaseUrl: string | null;
}

type WorkspaceEvent = "workspace.created" | "workspace.updated" | "workspace.deleted";

/** What one change of one workspace asks of the tables, with the workspace locked until it ends. */
export interface WorkspaceChange {
  /** The workspace's tenant and active flag; null when it does not exist. */
  existing(): Promise<{ readonly tenantKey: string; readonly isActive: boolean } | null>;
  /** Those of `bindings` that another workspace holds, with that workspace. */
  taken(bindings: readonly WorkspaceBinding[]): Promise<Array<WorkspaceBinding & { workspaceKey: string }>>;
  /**
   * Another workspace's bindings that those of `bindings` this workspace does not hold yet would take
   * paths from: on the same host, a shorter prefix (`/` included) that the new one lies under.
   */
  shadowed(
    bindings: readonly WorkspaceBinding[],
  ): Promise<Array<WorkspaceBinding & { workspaceKey: string }>>;
  /** Creates or replaces the workspace's fields; false when its tenant does not exist. */
  save(fields: WorkspaceFields): Promise<boolean>;
  /** The hosts' assignments, for the bindings' claim (their changes serialised from here on). */
  hosts(): Promise<HostChange>;
  /** Replaces the workspace's bindings. */
  bind(bindings: readonly WorkspaceBinding[]): Promise<void>;
  read(): Promise<Workspace>;
  /**
   * Deletes the workspace and what is kept for it (its custom field values, its media files' records);
   * its tenant and the ids of the media files whose bytes are to go, or null when it does not exist.
   */
  remove(): Promise<{ readonly tenantKey: string; readonly media: readonly string[] } | null>;
  /** Records the workspace's event with the change, to be relayed once it commits. */
  record<N extends WorkspaceEvent>(eventName: N, data: PlatformEventData[N]): Promise<void>;
}

/** The workspaces' tables. */
export interface WorkspaceTables {
  /** A page of workspaces by key, after `after`: one more than `limit` when there are more. */
  page(filter: {
    readonly only: string | null;
    readonly tenantKey: string | null;
    readonly after: string | null;
    readonly limit: number;
  }): Promise<Workspace[]>;
  find(key: string): Promise<Workspace | null>;
  /** Runs `change` as one change of the workspace `key`. */
  change<T>(key: string, change: (tables: WorkspaceChange) => Promise<T>): Promise<T>;
}

export interface WorkspaceDeps {
  readonly workspaces: WorkspaceTables;
  /** A deleted workspace's media files' bytes. */
  readonly mediaBytes: MediaBytes;
}

type Handler<K extends keyof typeof resolverRoutes> = RouteHandlerWith<
  WorkspaceDeps,
  (typeof resolverRoutes)[K]
>;

interface WorkspaceRow {
  key: string;
  tenant_key: string;
  name: string;
  type: string;
  is_active: boolean;
  access_policy: "Public" | "Authenticated";
  public_base_url: string | null;
  created_at: Date;
  updated_at: Date;
  bindings: Array<{ host: string; path_prefix: string }>;
}

const WORKSPACES: Listing = { tag: "workspaces", kinds: ["text"] };

const selectWorkspace = sql`
  SELECT w.*, COALESCE((
    SELECT json_agg(json_build_object('host', b.host, 'path_prefix', b.path_prefix) ORDER BY b.host, b.path_prefix)
    FROM resolver.workspace_bindings b WHERE b.workspace_key = w.key), '[]'::json) AS bindings
  FROM resolver.workspaces w`;

const workspaceOf = (r: WorkspaceRow): Workspace => ({
  key: r.key,
  tenantKey: r.tenant_key,
  name: r.name,
  type: r.type,
  isActive: r.is_active,
  accessPolicy: r.access_policy,
  publicBaseUrl: r.public_base_url,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  bindings: r.bindings.map((b) => ({ host: b.host, pathPrefix: b.path_prefix })),
});

async function findWorkspace(db: Queries, key: string): Promise<Workspace | null> {
  const row = await db.maybeOne<WorkspaceRow>(sql`${selectWorkspace} WHERE w.key = ${key}`);
  return row === null ? null : workspaceOf(row);
}

/** The PostgreSQL workspace tables; events go through `outbox`. */
export function workspaceTables(db: Db, outbox: Outbox<PlatformEventData>): WorkspaceTables {
  return {
    async page({ only, tenantKey, after, limit }) {
      const rows = await db.any<WorkspaceRow>(sql`
        ${selectWorkspace}
        WHERE (${only}::text IS NULL OR w.key = ${only})
          AND (${tenantKey}::text IS NULL OR w.tenant_key = ${tenantKey})
          AND (${after}::text IS NULL OR w.key > ${after})
        ORDER BY w.key LIMIT ${limit + 1}`);
      return rows.map(workspaceOf);
    },
    find: (key) => findWorkspace(db, key),
    change: (key, change) =>
      db.transaction((tx) =>
        change({
          async existing() {
            const row = await tx.maybeOne<{ tenant_key: string; is_active: boolean }>(
              sql`SELECT tenant_key, is_active FROM resolver.workspaces WHERE key = ${key} FOR UPDATE`,
            );
            return row === null ? null : { tenantKey: row.tenant_key, isActive: row.is_active };
          },
          async taken(bindings) {
            const rows = await tx.any<{ host: string; path_prefix: string; workspace_key: string }>(sql`
              SELECT host, path_prefix, workspace_key FROM resolver.workspace_bindings
              WHERE workspace_key <> ${key}
                AND (host, path_prefix) IN (SELECT * FROM unnest(${bindings.map((x) => x.host)}::text[], ${bindings.map((x) => x.pathPrefix)}::text[]))`);
            return rows.map((r) => ({
              host: r.host,
              pathPrefix: r.path_prefix,
              workspaceKey: r.workspace_key,
            }));
          },
          async shadowed(bindings) {
            const rows = await tx.any<{ host: string; path_prefix: string; workspace_key: string }>(sql`
              SELECT DISTINCT b.host, b.path_prefix, b.workspace_key
              FROM unnest(${bindings.map((x) => x.host)}::text[], ${bindings.map((x) => x.pathPrefix)}::text[])
                AS n(host, prefix)
              JOIN resolver.workspace_bindings b
                ON b.host = n.host AND b.workspace_key <> ${key} AND b.path_prefix <> n.prefix
               AND (b.path_prefix = '/' OR starts_with(n.prefix, b.path_prefix || '/'))
              WHERE NOT EXISTS (
                SELECT 1 FROM resolver.workspace_bindings mine
                WHERE mine.workspace_key = ${key} AND mine.host = n.host AND mine.path_prefix = n.prefix)`);
            return rows.map((r) => ({
              host: r.host,
              pathPrefix: r.path_prefix,
              workspaceKey: r.workspace_key,
            }));
          },
          async save(f) {
            try {
              await tx.query(sql`
                INSERT INTO resolver.workspaces (key, tenant_key, name, type, is_active, access_policy, public_base_url)
                VALUES (${key}, ${f.tenantKey}, ${f.name}, ${f.type}, ${f.isActive ?? true},
                        ${f.accessPolicy}, ${f.publicBaseUrl})
                ON CONFLICT (key) DO UPDATE SET
                  name = excluded.name, type = excluded.type,
                  is_active = CASE WHEN ${f.isActive === undefined} THEN resolver.workspaces.is_active ELSE excluded.is_active END,
                  access_policy = excluded.access_policy, public_base_url = excluded.public_base_url, updated_at = now()`);
              return true;
            } catch (error) {
              if (isForeignKeyViolation(error)) return false;
              throw error;
            }
          },
          hosts: () => lockedHostChange(tx),
          async bind(bindings) {
            await tx.query(sql`DELETE FROM resolver.workspace_bindings WHERE workspace_key = ${key}`);
            await tx.query(sql`
              INSERT INTO resolver.workspace_bindings (workspace_key, host, path_prefix)
              SELECT ${key}, h, p FROM unnest(${bindings.map((x) => x.host)}::text[], ${bindings.map((x) => x.pathPrefix)}::text[]) AS t(h, p)`);
          },
          read: async () => (await findWorkspace(tx, key)) as Workspace,
          async remove() {
            const media = await tx.any<{ id: string }>(
              sql`DELETE FROM resolver.media WHERE workspace_key = ${key} RETURNING id`,
            );
            const gone = await tx.maybeOne<{ tenant_key: string }>(
              sql`DELETE FROM resolver.workspaces WHERE key = ${key} RETURNING tenant_key`,
            );
            if (gone === null) return null;
            await tx.query(sql`
              DELETE FROM resolver.custom_field_values WHERE entity_name = 'workspace' AND entity_id = ${key}`);
            return { tenantKey: gone.tenant_key, media: media.map((m) => m.id) };
          },
          async record(eventName, data) {
            await outbox.record(tx, eventName, key, data);
          },
        }),
      ),
  };
}

export const workspaceView = (w: Workspace) => ({
  workspaceKey: w.key,
  tenantKey: w.tenantKey,
  name: w.name,
  type: w.type,
  isActive: w.isActive,
  accessPolicy: w.accessPolicy,
  bindings: w.bindings.map((b) => ({ host: b.host, pathPrefix: b.pathPrefix })),
  publicBaseUrl: w.publicBaseUrl,
  createdAtUtc: w.createdAt.toISOString(),
  updatedAtUtc: w.updatedAt.toISOString(),
});

export const listWorkspaces: Handler<"workspaces.list"> = async (deps, req) => {
  const reach = requireReach(req.principal);
  const q = req.query;
  const { limit, after } = readPage(q, WORKSPACES);
  const only = reach.kind === "workspace" ? reach.workspaceKey : (q.workspaceKey ?? null);
  if (reach.kind === "workspace" && q.workspaceKey !== undefined && q.workspaceKey !== reach.workspaceKey) {
    throw new NotFoundError(`Workspace '${q.workspaceKey}' was not found.`);
  }
  const rows = await deps.workspaces.page({
    only,
    tenantKey: q.tenantKey ?? null,
    after: after?.[0] ?? null,
    limit,
  });
  return { status: 200, body: toPage(rows, limit, WORKSPACES, (w) => [w.key], workspaceView) };
};

export const getWorkspace: Handler<"workspaces.get"> = async (deps, req) => {
  const found = await deps.workspaces.find(req.params.workspaceKey);
  if (found === null) throw new NotFoundError(`Workspace '${req.params.workspaceKey}' was not found.`);
  return { status: 200, body: workspaceView(found) };
};

/** The bindings, normalised as resolution reads them; each violation listed. */
function normaliseBindings(bindings: ReadonlyArray<{ host: string; pathPrefix?: string }>) {
  const violations: Array<{ field: string; message: string }> = [];
  const out = new Map<string, { host: string; pathPrefix: string }>();
  bindings.forEach((b, i) => {
    const host = normaliseHost(b.host);
    if (host === null || host !== b.host.trim().toLowerCase().replace(/:\d+$/, "") || host.includes(",")) {
      violations.push({ field: `/body/bindings/${i}/host`, message: `'${b.host}' is not a host name` });
      return;
    }
    const raw = b.pathPrefix ?? "/";
    const prefix = raw === "/" ? "/" : raw.replace(/\/+$/, "");
    if (
      !/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(raw) ||
      prefix.includes("//") ||
      /(^|\/)\.\.?(\/|$)/.test(prefix)
    ) {
      violations.push({ field: `/body/bindings/${i}/pathPrefix`, message: `'${raw}' is not a path prefix` });
      return;
    }
    out.set(`${host} ${prefix}`, { host, pathPrefix: prefix === "" ? "/" : prefix });
  });
  if (violations.length > 0) throw new ValidationError(violations);
  return [...out.values()];
}

export const putWorkspace: Handler<"workspaces.put"> = async (deps, req) => {
  const key = req.params.workspaceKey;
  const b = req.body;
  const bindings = b.bindings === undefined ? undefined : normaliseBindings(b.bindings);
  const platform = reachOf(req.principal).kind === "platform";
  const { created, workspace } = await deps.workspaces.change(key, async (tables) => {
    const existing = await tables.existing();
    if (existing === null && !platform) {
      throw new SvcError(ErrorCode.Forbidden, "Only a platform session creates workspaces.", {
        extensions: { missingPermission: "workspace.update", requiredScope: "platform" },
      });
    }
    // Operators' decisions stick: only a platform session turns a workspace on or off.
    if (!platform && b.isActive !== undefined && b.isActive !== existing?.isActive) {
      throw new SvcError(ErrorCode.Forbidden, "Only a platform session turns a workspace on or off.", {
        extensions: { rule: "platform-only-field", field: "/body/isActive", requiredScope: "platform" },
      });
    }
    if (existing !== null && existing.tenantKey !== b.tenantKey) {
      throw new SvcError(
        ErrorCode.Conflict,
        `Workspace '${key}' belongs to tenant '${existing.tenantKey}'; it cannot move.`,
      );
    }
    if (bindings !== undefined) {
      const taken = await tables.taken(bindings);
      const first = taken[0];
      if (first !== undefined) {
        const where = `${first.host}${first.pathPrefix === "/" ? "" : first.pathPrefix}`;
        // A platform session sees every workspace; a workspace session learns only that it is taken.
        throw new SvcError(
          ErrorCode.Conflict,
          platform ? `${where} is bound to workspace '${first.workspaceKey}'.` : `${where} is already bound.`,
          {
            extensions: {
              bindings: taken.map((t) => ({
                host: t.host,
                pathPrefix: t.pathPrefix,
                ...(platform ? { workspaceKey: t.workspaceKey } : {}),
              })),
            },
          },
        );
      }
    }
    // A workspace session does not take paths that another workspace serves on the same host (a binding
    // under its prefix would win the longest-prefix match): only a platform session splits a host so.
    if (bindings !== undefined && !platform) {
      const under = (await tables.shadowed(bindings))[0];
      if (under !== undefined) {
        const where = `${under.host}${under.pathPrefix === "/" ? "" : under.pathPrefix}`;
        throw new SvcError(
          ErrorCode.Conflict,
          `Paths under ${where} are served by another workspace: only a platform session binds a prefix under them.`,
          {
            extensions: {
              rule: "binding-under-another-workspace",
              host: under.host,
              pathPrefix: under.pathPrefix,
            },
          },
        );
      }
    }
    const saved = await tables.save({
      tenantKey: b.tenantKey,
      name: b.name,
      type: b.type ?? "base",
      isActive: b.isActive,
      accessPolicy: b.accessPolicy ?? "Public",
      publicBaseUrl: b.publicBaseUrl ?? null,
    });
    if (!saved) {
      throw new ValidationError([
        { field: "/body/tenantKey", message: `tenant '${b.tenantKey}' does not exist` },
      ]);
    }
    if (bindings !== undefined) {
      // A host belongs to one tenant: only its workspaces bind paths under it. After the save, which
      // refuses a tenant that does not exist (400) before a host is assigned to it. No bindings, no
      // claim: the host assignments' lock is taken only for hosts to claim.
      if (bindings.length > 0) {
        // Assigning a host no tenant has is the hosts routes' right (`tenant.update`), not workspace.update's.
        await claimHosts(
          await tables.hosts(),
          b.tenantKey,
          bindings.map((x) => x.host),
          platform && hasPermission(req.principal, "tenant.update"),
        );
      }
      await tables.bind(bindings);
    }
    const workspace = await tables.read();
    await tables.record(
      existing === null ? "workspace.created" : "workspace.updated",
      workspaceView(workspace),
    );
    return { created: existing === null, workspace };
  });
  return {
    status: created ? 201 : 200,
    ...(created ? { headers: { location: `/api/workspaces/${key}` } } : {}),
    body: workspaceView(workspace),
  };
};

export const deleteWorkspace: Handler<"workspaces.delete"> = async (deps, req) => {
  const key = req.params.workspaceKey;
  const media = await deps.workspaces.change(key, async (tables) => {
    const gone = await tables.remove();
    if (gone === null) throw new NotFoundError(`Workspace '${key}' was not found.`);
    await tables.record("workspace.deleted", { workspaceKey: key, tenantKey: gone.tenantKey });
    return gone.media;
  });
  // Its files' bytes go too, once the deletion is committed.
  deleteBytesAfterCommit(deps.mediaBytes, media);
  return { status: 204 };
};
