/**
 * Integrations (API clients): a workspace session manages its workspace's, a platform session any. The
 * secret is shown once and stored as a SHA-256 digest (it is 256 random bits).
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";

import { listWorkspace, reachCondition, WILDCARD } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { RouteHandlerWith } from "@svc/contracts";
import { type Db, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import { noContent, ok, type RbacRoutes } from "./deps.js";
import { knownKeys } from "./roles.js";
import { refuseBeyondOwnRights } from "./users.js";

export interface IntegrationRow {
  id: string;
  name: string;
  clientId: string;
  workspaceKey: string | null;
  permissions: string[];
  createdAt: Date;
}

/** What the integration routes ask of their tables; `principal` limits each to what it reaches. */
export interface IntegrationTables {
  list(principal: Principal): Promise<IntegrationRow[]>;
  /** Every permission key the platform knows (its own and the installed plugins'). */
  knownKeys(): Promise<ReadonlySet<string>>;
  insert(row: Omit<IntegrationRow, "createdAt"> & { secretDigest: string }): Promise<void>;
  /** False when the principal reaches no integration of that id. */
  remove(principal: Principal, id: string): Promise<boolean>;
}

const reach = (principal: Principal) => reachCondition(principal, (key) => sql`workspace_key = ${key}`);

/** The integration table in PostgreSQL. */
export function integrationTables(db: Db): IntegrationTables {
  return {
    list: (principal) =>
      db.any<IntegrationRow>(sql`
        SELECT id, name, client_id AS "clientId", workspace_key AS "workspaceKey", permissions,
               created_at AS "createdAt"
        FROM rbac.integrations
        WHERE ${reach(principal)}
        ORDER BY created_at`),
    knownKeys: () => knownKeys(db),
    insert: async (r) => {
      await db.query(sql`
        INSERT INTO rbac.integrations (id, name, client_id, secret_hash, workspace_key, permissions)
        VALUES (${r.id}, ${r.name}, ${r.clientId}, ${r.secretDigest}, ${r.workspaceKey}, ${r.permissions}::text[])`);
    },
    remove: async (principal, id) =>
      (await db.maybeOne(sql`
        DELETE FROM rbac.integrations WHERE id = ${id} AND ${reach(principal)} RETURNING 1 AS gone`)) !==
      null,
  };
}

type IntegrationHandler<K extends keyof RbacRoutes> = RouteHandlerWith<
  { readonly integrations: IntegrationTables },
  RbacRoutes[K]
>;

export const listIntegrations: IntegrationHandler<"integrations.list"> = async (deps, req) => {
  const rows = await deps.integrations.list(req.principal);
  return ok(rows.map(({ createdAt, ...r }) => ({ ...r, createdAtUtc: createdAt.toISOString() })));
};

export const createIntegration: IntegrationHandler<"integrations.create"> = async (deps, req) => {
  // A workspace session creates integrations of its own workspace (naming another is a 404); a platform
  // session's integration without a workspace is platform-wide; a session without a scope, none (403).
  const workspaceKey = listWorkspace(req.principal, req.body.workspaceKey ?? undefined) ?? null;
  const permissions = req.body.permissions ?? [];
  const known = await deps.integrations.knownKeys();
  const unknown = permissions.filter((k) => !known.has(k) || k === WILDCARD);
  if (unknown.length > 0) {
    throw new ValidationError(
      unknown.map((k) => ({ field: "/body/permissions", message: `unknown or disallowed key '${k}'` })),
    );
  }
  // An integration acts with its keys: a caller gives it only keys it holds itself.
  refuseBeyondOwnRights(req.principal, "The integration", [{ name: "integration", permissions }]);
  const id = randomUUID();
  const clientId = `svc_${randomBytes(9).toString("base64url")}`;
  const secret = randomBytes(32).toString("base64url");
  const secretDigest = createHash("sha256").update(secret).digest("hex");
  await deps.integrations.insert({
    id,
    name: req.body.name,
    clientId,
    secretDigest,
    workspaceKey,
    permissions,
  });
  return ok({ id, name: req.body.name, clientId, clientSecret: secret, workspaceKey, permissions }, 201);
};

export const deleteIntegration: IntegrationHandler<"integrations.delete"> = async (deps, req) => {
  if (!(await deps.integrations.remove(req.principal, req.params.id)))
    throw new NotFoundError(`Integration '${req.params.id}' was not found.`);
  return noContent();
};
