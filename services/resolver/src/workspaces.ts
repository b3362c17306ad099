/**
 * Workspaces: list, read, create or replace with PUT, delete. A workspace has a name, a
 * type, a tenant, an active flag, an access policy (`Public`, the default, or `Authenticated`), host
 * bindings with path prefixes and a public base URL. Hosts and prefixes are normalised as resolution reads
 * them; a host+prefix pair belongs to one workspace (409 naming it). Creating is for platform sessions (a
 * workspace session reaches only its own, existing workspace); a workspace's tenant does not change.
 * `workspace.created`, `workspace.updated` and `workspace.deleted` are recorded with the change.
 */
import { reachOf, requireReach } from "@svc/access";
import { isForeignKeyViolation, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";
import { normaliseHost } from "@svc/workspace";

import type { ResolverHandler } from "./deps.js";
import { claimHosts, lockedHostChange } from "./tenant-hosts.js";

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

export const workspaceView = (r: WorkspaceRow) => ({
  workspaceKey: r.key,
  tenantKey: r.tenant_key,
  name: r.name,
  type: r.type,
  isActive: r.is_active,
  accessPolicy: r.access_policy,
  bindings: r.bindings.map((b) => ({ host: b.host, pathPrefix: b.path_prefix })),
  publicBaseUrl: r.public_base_url,
  createdAtUtc: r.created_at.toISOString(),
  updatedAtUtc: r.updated_at.toISOString(),
});

export async function findWorkspace(db: Queries, key: string): Promise<WorkspaceRow | null> {
  return db.maybeOne<WorkspaceRow>(sql`${selectWorkspace} WHERE w.key = ${key}`);
}

export const listWorkspaces: ResolverHandler<"workspaces.list"> = async (deps, req) => {
  const reach = requireReach(req.principal);
  const q = req.query;
  const { limit, after } = readPage(q, WORKSPACES);
  const only = reach.kind === "workspace" ? reach.workspaceKey : (q.workspaceKey ?? null);
  if (reach.kind === "workspace" && q.workspaceKey !== undefined && q.workspaceKey !== reach.workspaceKey) {
    throw new NotFoundError(`Workspace '${q.workspaceKey}' was not found.`);
  }
  const rows = await deps.db.any<WorkspaceRow>(sql`
    ${selectWorkspace}
    WHERE (${only}::text IS NULL OR w.key = ${only})
      AND (${q.tenantKey ?? null}::text IS NULL OR w.tenant_key = ${q.tenantKey ?? null})
      AND (${after?.[0] ?? null}::text IS NULL OR w.key > ${after?.[0] ?? null})
    ORDER BY w.key LIMIT ${limit + 1}`);
  return { status: 200, body: toPage(rows, limit, WORKSPACES, (r) => [r.key], workspaceView) };
};

export const getWorkspace: ResolverHandler<"workspaces.get"> = async (deps, req) => {
  const row = await findWorkspace(deps.db, req.params.workspaceKey);
  if (row === null) throw new NotFoundError(`Workspace '${req.params.workspaceKey}' was not found.`);
  return { status: 200, body: workspaceView(row) };
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

export const putWorkspace: ResolverHandler<"workspaces.put"> = async (deps, req) => {
  const key = req.params.workspaceKey;
  const b = req.body;
  const bindings = b.bindings === undefined ? undefined : normaliseBindings(b.bindings);
  const platform = reachOf(req.principal).kind === "platform";
  const { created, row } = await deps.db.transaction(async (tx) => {
    const existing = await tx.maybeOne<{ tenant_key: string; is_active: boolean }>(
      sql`SELECT tenant_key, is_active FROM resolver.workspaces WHERE key = ${key} FOR UPDATE`,
    );
    if (existing === null && !platform) {
      throw new SvcError(ErrorCode.Forbidden, "Only a platform session creates workspaces.", {
        extensions: { missingPermission: "workspace.update", requiredScope: "platform" },
      });
    }
    // Operators' decisions stick: only a platform session turns a workspace on or off.
    if (!platform && b.isActive !== undefined && b.isActive !== existing?.is_active) {
      throw new SvcError(ErrorCode.Forbidden, "Only a platform session turns a workspace on or off.", {
        extensions: { rule: "platform-only-field", field: "/body/isActive", requiredScope: "platform" },
      });
    }
    if (existing !== null && existing.tenant_key !== b.tenantKey) {
      throw new SvcError(
        ErrorCode.Conflict,
        `Workspace '${key}' belongs to tenant '${existing.tenant_key}'; it cannot move.`,
      );
    }
    if (bindings !== undefined) {
      const taken = await tx.any<{ host: string; path_prefix: string; workspace_key: string }>(sql`
        SELECT host, path_prefix, workspace_key FROM resolver.workspace_bindings
        WHERE workspace_key <> ${key}
          AND (host, path_prefix) IN (SELECT * FROM unnest(${bindings.map((x) => x.host)}::text[], ${bindings.map((x) => x.pathPrefix)}::text[]))`);
      if (taken.length > 0) {
        const where = `${taken[0]?.host}${taken[0]?.path_prefix === "/" ? "" : taken[0]?.path_prefix}`;
        // A platform session sees every workspace; a workspace session learns only that it is taken.
        throw new SvcError(
          ErrorCode.Conflict,
          platform
            ? `${where} is bound to workspace '${taken[0]?.workspace_key}'.`
            : `${where} is already bound.`,
          {
            extensions: {
              bindings: taken.map((t) => ({
                host: t.host,
                pathPrefix: t.path_prefix,
                ...(platform ? { workspaceKey: t.workspace_key } : {}),
              })),
            },
          },
        );
      }
    }
    try {
      await tx.query(sql`
        INSERT INTO resolver.workspaces (key, tenant_key, name, type, is_active, access_policy, public_base_url)
        VALUES (${key}, ${b.tenantKey}, ${b.name}, ${b.type ?? "base"}, ${b.isActive ?? true},
                ${b.accessPolicy ?? "Public"}, ${b.publicBaseUrl ?? null})
        ON CONFLICT (key) DO UPDATE SET
          name = excluded.name, type = excluded.type,
          is_active = CASE WHEN ${b.isActive === undefined} THEN resolver.workspaces.is_active ELSE excluded.is_active END,
          access_policy = excluded.access_policy, public_base_url = excluded.public_base_url, updated_at = now()`);
    } catch (error) {
      if (isForeignKeyViolation(error)) {
        throw new ValidationError([
          { field: "/body/tenantKey", message: `tenant '${b.tenantKey}' does not exist` },
        ]);
      }
      throw error;
    }
    if (bindings !== undefined) {
      // A host belongs to one tenant: only its workspaces bind paths under it. After
      // the upsert, which refuses a tenant that does not exist (400) before a host is assigned to it.
      await claimHosts(
        await lockedHostChange(tx),
        b.tenantKey,
        bindings.map((x) => x.host),
        platform,
      );
      await tx.query(sql`DELETE FROM resolver.workspace_bindings WHERE workspace_key = ${key}`);
      await tx.query(sql`
        INSERT INTO resolver.workspace_bindings (workspace_key, host, path_prefix)
        SELECT ${key}, h, p FROM unnest(${bindings.map((x) => x.host)}::text[], ${bindings.map((x) => x.pathPrefix)}::text[]) AS t(h, p)`);
    }
    const row = (await findWorkspace(tx, key)) as WorkspaceRow;
    await deps.outbox.record(
      tx,
      existing === null ? "workspace.created" : "workspace.updated",
      key,
      workspaceView(row),
    );
    return { created: existing === null, row };
  });
  return {
    status: created ? 201 : 200,
    ...(created ? { headers: { location: `/api/workspaces/${key}` } } : {}),
    body: workspaceView(row),
  };
};

export const deleteWorkspace: ResolverHandler<"workspaces.delete"> = async (deps, req) => {
  const key = req.params.workspaceKey;
  await deps.db.transaction(async (tx) => {
    const gone = await tx.maybeOne<{ tenant_key: string }>(
      sql`DELETE FROM resolver.workspaces WHERE key = ${key} RETURNING tenant_key`,
    );
    if (gone === null) throw new NotFoundError(`Workspace '${key}' was not found.`);
    await deps.outbox.record(tx, "workspace.deleted", key, { workspaceKey: key, tenantKey: gone.tenant_key });
    await tx.query(sql`
      DELETE FROM resolver.custom_field_values WHERE entity_name = 'workspace' AND entity_id = ${key}`);
  });
  return { status: 204 };
};
