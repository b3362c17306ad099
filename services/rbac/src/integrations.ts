/**
 * Integrations (API clients): a workspace session manages its workspace's, a platform session any. The
 * secret is shown once and stored as a SHA-256 digest (it is 256 random bits).
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";

import { listWorkspace, reachCondition, WILDCARD } from "@svc/access";
import type { Principal } from "@svc/bus";
import { sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";

import { noContent, ok, type RbacHandler } from "./deps.js";
import { knownKeys } from "./roles.js";

const reach = (principal: Principal) => reachCondition(principal, (key) => sql`workspace_key = ${key}`);

export const listIntegrations: RbacHandler<"integrations.list"> = async (deps, req) => {
  const rows = await deps.db.any<{
    id: string;
    name: string;
    clientId: string;
    workspaceKey: string | null;
    permissions: string[];
    createdAt: Date;
  }>(sql`
    SELECT id, name, client_id AS "clientId", workspace_key AS "workspaceKey", permissions, created_at AS "createdAt"
    FROM rbac.integrations
    WHERE ${reach(req.principal)}
    ORDER BY created_at`);
  return ok(rows.map(({ createdAt, ...r }) => ({ ...r, createdAtUtc: createdAt.toISOString() })));
};

export const createIntegration: RbacHandler<"integrations.create"> = async (deps, req) => {
  // A workspace session creates integrations of its own workspace (naming another is a 404); a platform
  // session's integration without a workspace is platform-wide; a session without a scope, none (403).
  const workspaceKey = listWorkspace(req.principal, req.body.workspaceKey ?? undefined) ?? null;
  const permissions = req.body.permissions ?? [];
  const known = await knownKeys(deps.db);
  const unknown = permissions.filter((k) => !known.has(k) || k === WILDCARD);
  if (unknown.length > 0) {
    throw new ValidationError(
      unknown.map((k) => ({ field: "/body/permissions", message: `unknown or disallowed key '${k}'` })),
    );
  }
  const id = randomUUID();
  const clientId = `svc_${randomBytes(9).toString("base64url")}`;
  const secret = randomBytes(32).toString("base64url");
  const digest = createHash("sha256").update(secret).digest("hex");
  await deps.db.query(sql`
    INSERT INTO rbac.integrations (id, name, client_id, secret_hash, workspace_key, permissions)
    VALUES (${id}, ${req.body.name}, ${clientId}, ${digest}, ${workspaceKey}, ${permissions}::text[])`);
  return ok({ id, name: req.body.name, clientId, clientSecret: secret, workspaceKey, permissions }, 201);
};

export const deleteIntegration: RbacHandler<"integrations.delete"> = async (deps, req) => {
  const row = await deps.db.maybeOne(sql`
    DELETE FROM rbac.integrations WHERE id = ${req.params.id} AND ${reach(req.principal)}
    RETURNING 1 AS gone`);
  if (row === null) throw new NotFoundError(`Integration '${req.params.id}' was not found.`);
  return noContent();
};
