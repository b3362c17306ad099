/**
 * rbac's handlers: sign-in, roles and grants, users, memberships and member roles, integrations, the
 * permission-key catalogue and session revocation. Every operator handler receives the principal the
 * gateway authenticated; the gateway has already checked the permission key, platform-only routes and
 * the workspace in the path, so handlers apply only reach (what a workspace session may see).
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";

import type { KV } from "@nats-io/kv";
import {
  type AccessClaims,
  assertPlatform,
  assertReachesWorkspace,
  CORE_PERMISSION_KEYS,
  filterWorkspaceKeys,
  reachOf,
  SYSTEM_ROLES,
  SystemRole,
  WILDCARD,
} from "@svc/access";
import type { Principal, RouteReply, RouteRequest } from "@svc/bus";
import type { Config } from "@svc/config";
import {
  type Db,
  decodeCursor,
  encodeCursor,
  isForeignKeyViolation,
  isUniqueViolation,
  type Queries,
  sql,
} from "@svc/db";
import { ConflictError, NotFoundError, UnauthenticatedError, ValidationError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import type { Outbox } from "@svc/outbox";

import { decoyHash, hashPassword, verifyPassword } from "./passwords.js";
import {
  findRole,
  findUser,
  findUserByName,
  isMember,
  listRoles,
  memberRoleKeys,
  type RoleRow,
  roleView,
  sessionsHoldingRole,
  sessionsOfUser,
  type UserRow,
  userView,
} from "./repository.js";
import type { TokenIssuer } from "./tokens.js";

export interface RbacDeps {
  readonly db: Db;
  readonly config: Config;
  readonly issuer: TokenIssuer;
  /** Events are recorded in the transaction of the change they describe, and relayed from there. */
  readonly outbox: Outbox;
  readonly revoked: KV;
  readonly log: Logger;
}

const ok = (body: unknown, status = 200): RouteReply => ({ status, body });
const noContent = (): RouteReply => ({ status: 204 });

const INVALID_LOGIN = "Invalid user name or password.";

/** Seeds (idempotently, at every start) the core keys, the system roles and roles from settings. */
export async function seedAccess(db: Db, config: Config): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(sql`
      INSERT INTO rbac.permission_keys (key, source)
      SELECT k, 'core' FROM unnest(${[...CORE_PERMISSION_KEYS]}::text[]) AS k
      ON CONFLICT (key) DO NOTHING`);
    for (const role of SYSTEM_ROLES) {
      // superadmin and admin keep their seeded grants; host.api's grants are the operators' to change.
      await tx.query(sql`
        INSERT INTO rbac.roles (name, description, scope, permissions, source)
        VALUES (${role.name}, ${role.description}, ${role.scope}, ${[...role.permissions]}::text[], 'system')
        ON CONFLICT (name) DO UPDATE SET
          permissions = CASE WHEN rbac.roles.name = 'host.api' THEN rbac.roles.permissions ELSE excluded.permissions END,
          scope = excluded.scope, source = 'system'`);
    }
    for (const role of config.backendHost.rbacRoles) {
      await tx.query(sql`
        INSERT INTO rbac.roles (name, description, scope, permissions, source)
        VALUES (${role.name}, 'Configured in BackendHost:RbacRoles', 'platform', ${[...role.permissions]}::text[], 'config')
        ON CONFLICT (name) DO UPDATE SET permissions = excluded.permissions, updated_at = now()
        WHERE rbac.roles.source <> 'system'`);
    }
  });
}

/**
 * Revokes sessions: first in the KV bucket every gateway watches, then marked in PostgreSQL. If a KV write
 * fails the request fails and the sessions are still unmarked, so a retry revokes them again; nothing is
 * ever marked revoked without the gateways having been told.
 */
async function revoke(deps: RbacDeps, sessions: ReadonlyArray<{ id: string; expires_at: Date }>) {
  if (sessions.length === 0) return;
  await Promise.all(sessions.map((s) => deps.revoked.put(s.id, String(s.expires_at.getTime()))));
  await deps.db.query(
    sql`UPDATE rbac.sessions SET revoked_at = now() WHERE id = ANY(${sessions.map((s) => s.id)}::uuid[])`,
  );
  deps.log.info({ count: sessions.length }, "sessions revoked");
}

// ---------------------------------------------------------------------------------------------------------
// Sign-in

export interface LoginRequest {
  readonly userName: string;
  readonly password: string;
  readonly workspaceKey?: string | null;
}

export async function login(deps: RbacDeps, request: LoginRequest) {
  const { db, config, issuer } = deps;
  const found = await findUserByName(db, request.userName);
  // Verify against a decoy hash for unknown users, so timing does not tell which part was wrong.
  const valid = await verifyPassword(request.password, found?.password_hash ?? (await decoyHash()));
  if (!valid || found === null || !found.is_active) throw new UnauthenticatedError(INVALID_LOGIN);
  const workspaceKey = request.workspaceKey?.trim() || undefined;
  const lifetime = config.backendHost.accessTokenLifetimeSeconds;
  const sid = randomUUID();

  // The session is created under share locks on what it is derived from (the user, the membership, the
  // roles), after checking they are unchanged since the password was verified. A concurrent deactivation,
  // password change, membership removal or role change either commits first (and the sign-in fails or
  // sees the new state) or waits for this commit (and then revokes this session too).
  const { scope, roles, permissions } = await db.transaction(async (tx) => {
    const user = await tx.maybeOne<UserRow>(sql`SELECT * FROM rbac.users WHERE id = ${found.id} FOR SHARE`);
    if (user === null || !user.is_active || user.password_hash !== found.password_hash) {
      throw new UnauthenticatedError(INVALID_LOGIN);
    }
    let scope: "platform" | "workspace" | undefined;
    let roles: string[] = [];
    let permissions: string[] = [];
    if (workspaceKey !== undefined) {
      const member = await tx.maybeOne(sql`
        SELECT 1 AS one FROM rbac.memberships WHERE workspace_key = ${workspaceKey} AND user_id = ${user.id} FOR SHARE`);
      if (member === null) throw new UnauthenticatedError(INVALID_LOGIN);
      const rows = await tx.any<{ role: string; permissions: string[] }>(sql`
        SELECT r.name AS role, r.permissions FROM rbac.membership_roles mr JOIN rbac.roles r ON r.name = mr.role
        WHERE mr.workspace_key = ${workspaceKey} AND mr.user_id = ${user.id} ORDER BY r.name FOR SHARE OF r`);
      roles = rows.map((r) => r.role).filter((r) => r !== SystemRole.SuperAdmin);
      // Plugin keys need the plugin registry (a later issue): no plugin counts as active yet.
      permissions = filterWorkspaceKeys(
        rows.flatMap((r) => r.permissions),
        new Set(),
      );
      scope = "workspace";
    } else if (user.global_role !== null) {
      const role = await tx.maybeOne<RoleRow>(
        sql`SELECT * FROM rbac.roles WHERE name = ${user.global_role} FOR SHARE`,
      );
      if (role !== null) {
        roles = [role.name];
        permissions = role.permissions;
        scope = "platform";
      }
    }
    await tx.query(sql`
      INSERT INTO rbac.sessions (id, user_id, workspace_key, roles, expires_at)
      VALUES (${sid}, ${user.id}, ${workspaceKey ?? null}, ${roles}::text[], now() + make_interval(secs => ${lifetime}))`);
    return { scope, roles, permissions };
  });
  const claims: AccessClaims = {
    sub: found.id,
    ...(scope ? { svc_scope: scope } : {}),
    ...(workspaceKey ? { workspace_key: workspaceKey } : {}),
    permission: permissions,
    role: roles,
    sid,
    name: found.user_name,
  };
  return {
    accessToken: await issuer.sign(claims, lifetime),
    tokenType: "Bearer" as const,
    expiresIn: lifetime,
  };
}

// ---------------------------------------------------------------------------------------------------------
// Roles, grants and the key catalogue

async function knownKeys(db: Queries): Promise<Set<string>> {
  const rows = await db.any<{ key: string }>(sql`SELECT key FROM rbac.permission_keys`);
  return new Set([WILDCARD, ...rows.map((r) => r.key)]);
}

export async function putRole(
  deps: RbacDeps,
  req: RouteRequest<
    { role: string },
    Record<string, never>,
    { permissions: string[]; description?: string; scope?: "platform" | "workspace" }
  >,
) {
  assertPlatform(req.principal, "role.update");
  const name = req.params.role;
  if (name === SystemRole.SuperAdmin) throw new ConflictError("The superadmin role cannot be changed.");
  const known = await knownKeys(deps.db);
  const unknown = req.body.permissions.filter((k) => !known.has(k));
  if (unknown.length > 0) {
    throw new ValidationError(
      unknown.map((k) => ({ field: "/body/permissions", message: `unknown permission key '${k}'` })),
    );
  }
  const { role, existed } = await deps.db.transaction(async (tx) => {
    const before = await findRole(tx, name);
    const row = await tx.one<RoleRow>(sql`
      INSERT INTO rbac.roles (name, description, scope, permissions, source)
      VALUES (${name}, ${req.body.description ?? ""}, ${req.body.scope ?? "platform"}, ${req.body.permissions}::text[], 'api')
      ON CONFLICT (name) DO UPDATE SET
        permissions = excluded.permissions,
        description = coalesce(${req.body.description ?? null}, rbac.roles.description),
        scope = CASE WHEN rbac.roles.source = 'system' THEN rbac.roles.scope ELSE coalesce(${req.body.scope ?? null}, rbac.roles.scope) END,
        updated_at = now()
      RETURNING *`);
    return { role: row, existed: before !== null };
  });
  if (existed) await revoke(deps, await sessionsHoldingRole(deps.db, name));
  return ok(roleView(role), existed ? 200 : 201);
}

export async function deleteRole(deps: RbacDeps, req: RouteRequest<{ role: string }>) {
  assertPlatform(req.principal, "role.update");
  const role = await findRole(deps.db, req.params.role);
  if (role === null) throw new NotFoundError(`Role '${req.params.role}' was not found.`);
  if (role.source === "system") throw new ConflictError(`The system role '${role.name}' cannot be deleted.`);
  // Delete first (it waits for sign-ins holding the role's row), then revoke every session that carries
  // the role: sessions record their roles, so they are found after the role is gone.
  await deps.db.query(sql`DELETE FROM rbac.roles WHERE name = ${role.name}`);
  await revoke(deps, await sessionsHoldingRole(deps.db, role.name));
  return noContent();
}

export async function listPermissionKeys(db: Queries) {
  return ok(await db.any(sql`SELECT key, source, description FROM rbac.permission_keys ORDER BY key`));
}

// ---------------------------------------------------------------------------------------------------------
// Paging (users, assignments, members): keyset on the lower-cased user name.

const MAX_PAGE = 100;
const USERS_CURSOR = "users";
function page(query: { limit?: number; cursor?: string }) {
  const limit = query.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new ValidationError([
      { field: "/query/limit", message: `must be an integer from 1 to ${MAX_PAGE}` },
    ]);
  }
  let after: string | null = null;
  if (query.cursor !== undefined) {
    const values = decodeCursor(query.cursor, USERS_CURSOR, ["text"]);
    if (values === null)
      throw new ValidationError([{ field: "/query/cursor", message: "is not a cursor this API issued" }]);
    after = values[0] as string;
  }
  return { limit, after };
}
function nextCursor(rows: UserRow[], limit: number) {
  const last = rows[limit - 1];
  return rows.length > limit && last ? encodeCursor(USERS_CURSOR, [last.user_name.toLowerCase()]) : null;
}

/** Which users a principal reaches: all for platform sessions; members of its workspace otherwise. */
function reachFilter(principal: Principal) {
  const reach = reachOf(principal);
  if (reach.kind === "platform") return sql`TRUE`;
  if (reach.kind === "workspace") {
    return sql`u.id IN (SELECT user_id FROM rbac.memberships WHERE workspace_key = ${reach.workspaceKey})`;
  }
  return sql`FALSE`;
}

async function listUserRows(
  db: Queries,
  principal: Principal,
  query: { limit?: number; cursor?: string },
  extra = sql`TRUE`,
) {
  const { limit, after } = page(query);
  const rows = await db.any<UserRow>(sql`
    SELECT u.* FROM rbac.users u
    WHERE ${reachFilter(principal)} AND ${extra} AND (${after}::text IS NULL OR lower(u.user_name) > ${after}::text)
    ORDER BY lower(u.user_name) LIMIT ${limit + 1}`);
  return { items: rows.slice(0, limit), nextCursor: nextCursor(rows, limit) };
}

// ---------------------------------------------------------------------------------------------------------
// Users

type UserBody = { userName?: string; password?: string; displayName?: string; email?: string | null };

/** The user if the principal reaches it (one query): any user for platform sessions, members otherwise. */
export async function reachableUser(
  deps: Pick<RbacDeps, "db">,
  principal: Principal,
  userId: string,
): Promise<UserRow> {
  const user = await deps.db.maybeOne<UserRow>(
    sql`SELECT u.* FROM rbac.users u WHERE u.id = ${userId} AND ${reachFilter(principal)}`,
  );
  if (user === null) throw new NotFoundError(`User '${userId}' was not found.`);
  return user;
}

function publicUser(u: UserRow) {
  return { userId: u.id, userName: u.user_name, displayName: u.display_name, email: u.email };
}

export async function createUser(
  deps: RbacDeps,
  req: RouteRequest<Record<string, string>, Record<string, never>, UserBody>,
) {
  const body = req.body;
  const hash = await hashPassword(body.password as string);
  let user: UserRow;
  try {
    user = await deps.db.transaction(async (tx) => {
      const row = await tx.one<UserRow>(sql`
        INSERT INTO rbac.users (id, user_name, display_name, email, password_hash)
        VALUES (${randomUUID()}, ${body.userName}, ${body.displayName ?? ""}, ${body.email ?? null}, ${hash})
        RETURNING *`);
      await deps.outbox.record(tx, "user.created", null, publicUser(row));
      return row;
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`The user name '${body.userName}' is taken.`);
    throw error;
  }
  return ok(userView(user), 201);
}

export async function updateUser(
  deps: RbacDeps,
  req: RouteRequest<{ userId: string }, Record<string, never>, UserBody>,
) {
  const existing = await reachableUser(deps, req.principal, req.params.userId);
  const body = req.body;
  const hash = body.password === undefined ? null : await hashPassword(body.password);
  const user = await deps.db.transaction(async (tx) => {
    const row = await tx.maybeOne<UserRow>(sql`
      UPDATE rbac.users SET
        display_name = coalesce(${body.displayName ?? null}, display_name),
        email = CASE WHEN ${body.email !== undefined} THEN ${body.email ?? null} ELSE email END,
        password_hash = coalesce(${hash}, password_hash),
        updated_at = now()
      WHERE id = ${existing.id} RETURNING *`);
    // Deleted by a concurrent request since it was read.
    if (row === null) throw new NotFoundError(`User '${existing.id}' was not found.`);
    await deps.outbox.record(tx, "user.updated", null, publicUser(row));
    return row;
  });
  if (hash !== null) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return ok(userView(user));
}

export async function setUserActivation(
  deps: RbacDeps,
  req: RouteRequest<{ userId: string }, { isActive: boolean }>,
) {
  const existing = await reachableUser(deps, req.principal, req.params.userId);
  const user = await deps.db.transaction(async (tx) => {
    const row = await tx.maybeOne<UserRow>(sql`
      UPDATE rbac.users SET is_active = ${req.query.isActive}, updated_at = now() WHERE id = ${existing.id} RETURNING *`);
    if (row === null) throw new NotFoundError(`User '${existing.id}' was not found.`);
    await deps.outbox.record(tx, "user.updated", null, { ...publicUser(row), isActive: row.is_active });
    return row;
  });
  if (!user.is_active) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return ok(userView(user));
}

export async function deleteUser(deps: RbacDeps, req: RouteRequest<{ userId: string }>) {
  const user = await reachableUser(deps, req.principal, req.params.userId);
  await revoke(deps, await sessionsOfUser(deps.db, user.id));
  await deps.db.transaction(async (tx) => {
    await tx.query(sql`DELETE FROM rbac.users WHERE id = ${user.id}`);
    await deps.outbox.record(tx, "user.deleted", null, { userId: user.id, userName: user.user_name });
  });
  return noContent();
}

export async function exportUser(deps: RbacDeps, req: RouteRequest<{ userId: string }>) {
  const user = await reachableUser(deps, req.principal, req.params.userId);
  const memberships = await deps.db.any(sql`
    SELECT m.workspace_key AS "workspaceKey", m.created_at AS "createdAtUtc",
           coalesce(array_agg(mr.role ORDER BY mr.role) FILTER (WHERE mr.role IS NOT NULL), '{}') AS roles
    FROM rbac.memberships m
    LEFT JOIN rbac.membership_roles mr USING (workspace_key, user_id)
    WHERE m.user_id = ${user.id} GROUP BY m.workspace_key, m.created_at ORDER BY m.workspace_key`);
  const sessions = await deps.db.any(sql`
    SELECT id, workspace_key AS "workspaceKey", roles, created_at AS "createdAtUtc", expires_at AS "expiresAtUtc",
           revoked_at AS "revokedAtUtc"
    FROM rbac.sessions WHERE user_id = ${user.id} ORDER BY created_at`);
  return ok({ exportedAtUtc: new Date().toISOString(), user: userView(user), memberships, sessions });
}

// ---------------------------------------------------------------------------------------------------------
// Global role assignments

export async function putAssignment(
  deps: RbacDeps,
  req: RouteRequest<{ userId: string }, Record<string, never>, { role: string }>,
) {
  assertPlatform(req.principal, "role.update");
  const user = await findUser(deps.db, req.params.userId);
  if (user === null) throw new NotFoundError(`User '${req.params.userId}' was not found.`);
  const role = await findRole(deps.db, req.body.role);
  if (role === null)
    throw new ValidationError([{ field: "/body/role", message: `unknown role '${req.body.role}'` }]);
  await deps.db.query(
    sql`UPDATE rbac.users SET global_role = ${role.name}, updated_at = now() WHERE id = ${user.id}`,
  );
  if (user.global_role !== role.name) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return ok({ userId: user.id, userName: user.user_name, role: role.name });
}

export async function deleteAssignment(deps: RbacDeps, req: RouteRequest<{ userId: string }>) {
  assertPlatform(req.principal, "role.update");
  const user = await findUser(deps.db, req.params.userId);
  if (user === null) throw new NotFoundError(`User '${req.params.userId}' was not found.`);
  await deps.db.query(
    sql`UPDATE rbac.users SET global_role = NULL, updated_at = now() WHERE id = ${user.id}`,
  );
  if (user.global_role !== null) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return noContent();
}

// ---------------------------------------------------------------------------------------------------------
// Memberships and member roles: the gateway limits a workspace session to its own workspace, and every
// handler checks the same again with the caller's principal.

type WkUser = { workspaceKey: string; userId: string };

async function memberRoles(db: Queries, workspaceKey: string, userId: string) {
  return (await memberRoleKeys(db, workspaceKey, userId)).map((r) => r.role);
}

export async function listMembers(
  deps: RbacDeps,
  req: RouteRequest<{ workspaceKey: string }, { limit?: number; cursor?: string }>,
) {
  const wk = req.params.workspaceKey;
  assertReachesWorkspace(req.principal, wk);
  const { items, nextCursor } = await listUserRows(
    deps.db,
    req.principal,
    req.query,
    sql`u.id IN (SELECT user_id FROM rbac.memberships WHERE workspace_key = ${wk})`,
  );
  const withRoles = await Promise.all(
    items.map(async (u) => ({ ...userView(u), roles: await memberRoles(deps.db, wk, u.id) })),
  );
  return ok({ items: withRoles, nextCursor });
}

export async function putMember(deps: RbacDeps, req: RouteRequest<WkUser>) {
  const { workspaceKey, userId } = req.params;
  assertReachesWorkspace(req.principal, workspaceKey);
  const user = await findUser(deps.db, userId);
  if (user === null) throw new NotFoundError(`User '${userId}' was not found.`);
  const inserted = await deps.db
    .transaction(async (tx) => {
      const row = await tx.maybeOne(sql`
        INSERT INTO rbac.memberships (workspace_key, user_id) VALUES (${workspaceKey}, ${userId})
        ON CONFLICT DO NOTHING RETURNING 1 AS created`);
      if (row !== null) {
        await deps.outbox.record(tx, "workspace.member-assigned", workspaceKey, {
          workspaceKey,
          userId,
          userName: user.user_name,
        });
      }
      return row;
    })
    .catch((error: unknown) => {
      // The user was deleted by a concurrent request since it was read.
      if (isForeignKeyViolation(error)) throw new NotFoundError(`User '${userId}' was not found.`);
      throw error;
    });
  return ok(
    { workspaceKey, userId, roles: await memberRoles(deps.db, workspaceKey, userId) },
    inserted ? 201 : 200,
  );
}

export async function deleteMember(deps: RbacDeps, req: RouteRequest<WkUser>) {
  const { workspaceKey, userId } = req.params;
  assertReachesWorkspace(req.principal, workspaceKey);
  const deleted = await deps.db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql`
      DELETE FROM rbac.memberships WHERE workspace_key = ${workspaceKey} AND user_id = ${userId} RETURNING 1 AS gone`);
    if (row !== null) {
      await deps.outbox.record(tx, "workspace.member-removed", workspaceKey, { workspaceKey, userId });
    }
    return row;
  });
  if (deleted === null) throw new NotFoundError(`User '${userId}' is not a member of '${workspaceKey}'.`);
  await revoke(deps, await sessionsOfUser(deps.db, userId, workspaceKey));
  return noContent();
}

export async function getMemberRoles(deps: RbacDeps, req: RouteRequest<WkUser>) {
  const { workspaceKey, userId } = req.params;
  assertReachesWorkspace(req.principal, workspaceKey);
  if (!(await isMember(deps.db, workspaceKey, userId))) {
    throw new NotFoundError(`User '${userId}' is not a member of '${workspaceKey}'.`);
  }
  return ok({ userId, roles: await memberRoles(deps.db, workspaceKey, userId) });
}

export async function putMemberRoles(
  deps: RbacDeps,
  req: RouteRequest<WkUser, Record<string, never>, { roles: string[] }>,
) {
  const { workspaceKey, userId } = req.params;
  assertReachesWorkspace(req.principal, workspaceKey);
  if (!(await isMember(deps.db, workspaceKey, userId))) {
    throw new NotFoundError(`User '${userId}' is not a member of '${workspaceKey}'.`);
  }
  // superadmin is a platform role: as a member role it would pass every check inside the workspace.
  const existing = new Set(
    (await listRoles(deps.db)).map((r) => r.name).filter((r) => r !== SystemRole.SuperAdmin),
  );
  const unknown = req.body.roles.filter((r) => !existing.has(r));
  if (unknown.length > 0) {
    throw new ValidationError(unknown.map((r) => ({ field: "/body/roles", message: `unknown role '${r}'` })));
  }
  await deps.db
    .transaction(async (tx) => {
      await tx.query(
        sql`DELETE FROM rbac.membership_roles WHERE workspace_key = ${workspaceKey} AND user_id = ${userId}`,
      );
      await tx.query(sql`
        INSERT INTO rbac.membership_roles (workspace_key, user_id, role)
        SELECT ${workspaceKey}, ${userId}, r FROM unnest(${req.body.roles}::text[]) AS r`);
    })
    .catch((error: unknown) => {
      // The membership or a role was deleted by a concurrent request since they were read.
      if (isForeignKeyViolation(error))
        throw new NotFoundError(`User '${userId}' is not a member of '${workspaceKey}', or a role is gone.`);
      throw error;
    });
  // The member's sessions in this workspace carry the old keys: end them (the new set applies at sign-in).
  await revoke(deps, await sessionsOfUser(deps.db, userId, workspaceKey));
  return ok({ userId, roles: [...req.body.roles].sort() });
}

// ---------------------------------------------------------------------------------------------------------
// Integrations (API clients): the secret is shown once, stored as a SHA-256 digest (it is 256 random bits).

function integrationReach(principal: Principal) {
  const reach = reachOf(principal);
  if (reach.kind === "platform") return sql`TRUE`;
  if (reach.kind === "workspace") return sql`workspace_key = ${reach.workspaceKey}`;
  return sql`FALSE`;
}

export async function listIntegrations(deps: RbacDeps, req: RouteRequest) {
  const rows = await deps.db.any(sql`
    SELECT id, name, client_id AS "clientId", workspace_key AS "workspaceKey", permissions, created_at AS "createdAtUtc"
    FROM rbac.integrations
    WHERE ${integrationReach(req.principal)}
    ORDER BY created_at`);
  return ok(rows);
}

export async function createIntegration(
  deps: RbacDeps,
  req: RouteRequest<
    Record<string, string>,
    Record<string, never>,
    { name: string; workspaceKey?: string | null; permissions?: string[] }
  >,
) {
  const reach = reachOf(req.principal);
  // A workspace session creates integrations of its own workspace; a session without a scope, none.
  if (reach.kind === "none") throw new NotFoundError("The session reaches no workspace.");
  const requested = req.body.workspaceKey ?? null;
  if (reach.kind === "workspace" && requested !== null && requested !== reach.workspaceKey) {
    throw new NotFoundError(`Workspace '${requested}' was not found.`);
  }
  const workspaceKey = reach.kind === "platform" ? requested : reach.workspaceKey;
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
}

export async function deleteIntegration(deps: RbacDeps, req: RouteRequest<{ id: string }>) {
  const row = await deps.db.maybeOne(sql`
    DELETE FROM rbac.integrations WHERE id = ${req.params.id} AND ${integrationReach(req.principal)}
    RETURNING 1 AS gone`);
  if (row === null) throw new NotFoundError(`Integration '${req.params.id}' was not found.`);
  return noContent();
}

export { listRoles, listUserRows, roleView, userView };
