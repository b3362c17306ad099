/**
 * Global users: a platform session reaches every user, a workspace session its workspace's
 * members (reads only: user writes and the data export are platform-only). Lists page by the lower-cased
 * user name.
 */
import { randomUUID } from "node:crypto";

import { reachCondition } from "@svc/access";
import type { Principal } from "@svc/bus";
import { isUniqueViolation, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError } from "@svc/errors";

import { noContent, ok, type RbacDeps, type RbacHandler, revoke } from "./deps.js";
import { hashPassword } from "./passwords.js";
import { sessionsOfUser, type UserRow, userView } from "./repository.js";

/** Users (and assignments, members) by lower-cased user name. */
const USERS: Listing = { tag: "users", kinds: ["text"] };

/** Which users a principal reaches: all for platform sessions; members of its workspace otherwise. */
const reachFilter = (principal: Principal) =>
  reachCondition(
    principal,
    (workspaceKey) =>
      sql`u.id IN (SELECT user_id FROM rbac.memberships WHERE workspace_key = ${workspaceKey})`,
  );

/** One page of the users a principal reaches, optionally narrowed by `extra`. */
export async function listUserRows(
  db: Queries,
  principal: Principal,
  query: { limit?: number; cursor?: string },
  extra = sql`TRUE`,
) {
  const { limit, after } = readPage(query, USERS);
  const rows = await db.any<UserRow>(sql`
    SELECT u.* FROM rbac.users u
    WHERE ${reachFilter(principal)} AND ${extra}
      AND (${after?.[0] ?? null}::text IS NULL OR lower(u.user_name) > ${after?.[0] ?? null}::text)
    ORDER BY lower(u.user_name) LIMIT ${limit + 1}`);
  return toPage(rows, limit, USERS, (last) => [last.user_name.toLowerCase()]);
}

/** The user if the principal reaches it (one query): any user for platform sessions, members otherwise. */
export async function reachableUser(db: Queries, principal: Principal, userId: string): Promise<UserRow> {
  const user = await db.maybeOne<UserRow>(
    sql`SELECT u.* FROM rbac.users u WHERE u.id = ${userId} AND ${reachFilter(principal)}`,
  );
  if (user === null) throw new NotFoundError(`User '${userId}' was not found.`);
  return user;
}

/** The user as events describe it. */
function publicUser(u: UserRow) {
  return { userId: u.id, userName: u.user_name, displayName: u.display_name, email: u.email };
}

export const listUsers: RbacHandler<"users.list"> = async (deps, req) => {
  const page = await listUserRows(deps.db, req.principal, req.query);
  return ok({ items: page.items.map(userView), nextCursor: page.nextCursor });
};

export const getUser: RbacHandler<"users.get"> = async (deps, req) =>
  ok(userView(await reachableUser(deps.db, req.principal, req.params.userId)));

export const createUser: RbacHandler<"users.create"> = async (deps, req) => {
  const body = req.body;
  const hash = await hashPassword(body.password);
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
};

/**
 * Whether a user holds a right the caller does not: a key of its global role or of any member role that the
 * caller lacks, a `*` grant, or superadmin. A caller that is a superadmin (or holds `*`) lacks nothing.
 */
export async function holdsMoreRights(db: Queries, principal: Principal, userId: string): Promise<boolean> {
  const callerAll = principal.roles.includes("superadmin") || principal.permissions.includes("*");
  if (callerAll) return false;
  const roles = await db.any<{ name: string; permissions: string[] }>(sql`
    SELECT r.name, r.permissions FROM rbac.users u JOIN rbac.roles r ON r.name = u.global_role WHERE u.id = ${userId}
    UNION ALL
    SELECT r.name, r.permissions FROM rbac.membership_roles mr JOIN rbac.roles r ON r.name = mr.role
    WHERE mr.user_id = ${userId}`);
  const held = new Set(principal.permissions);
  return roles.some(
    (r) => r.name === "superadmin" || r.permissions.some((key) => key === "*" || !held.has(key)),
  );
}

/**
 * No one changes a user more powerful than themselves: a caller may change a user's
 * password, e-mail, name, activation or existence only when every key the user holds (through the global
 * role and every member role) is a key the caller holds too; a superadmin (or a `*` grant) is changed only
 * by a superadmin or a `*` holder. Otherwise a 403 problem naming the rule.
 */
export async function requireNotMorePowerful(
  db: Queries,
  principal: Principal,
  userId: string,
): Promise<void> {
  if (await holdsMoreRights(db, principal, userId)) {
    throw new SvcError(
      ErrorCode.Forbidden,
      "This user holds rights you do not hold: only a caller with all of them (a superadmin for a superadmin) may change the user.",
      { extensions: { rule: "target-holds-more-rights" } },
    );
  }
}

export const updateUser: RbacHandler<"users.update"> = async (deps, req) => {
  const existing = await reachableUser(deps.db, req.principal, req.params.userId);
  await requireNotMorePowerful(deps.db, req.principal, existing.id);
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
};

export const setUserActivation: RbacHandler<"users.activation"> = async (deps, req) => {
  const existing = await reachableUser(deps.db, req.principal, req.params.userId);
  await requireNotMorePowerful(deps.db, req.principal, existing.id);
  const user = await deps.db.transaction(async (tx) => {
    const row = await tx.maybeOne<UserRow>(sql`
      UPDATE rbac.users SET is_active = ${req.query.isActive}, updated_at = now() WHERE id = ${existing.id} RETURNING *`);
    if (row === null) throw new NotFoundError(`User '${existing.id}' was not found.`);
    await deps.outbox.record(tx, "user.updated", null, { ...publicUser(row), isActive: row.is_active });
    return row;
  });
  if (!user.is_active) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return ok(userView(user));
};

export const deleteUser: RbacHandler<"users.delete"> = async (deps, req) => {
  const user = await reachableUser(deps.db, req.principal, req.params.userId);
  await requireNotMorePowerful(deps.db, req.principal, user.id);
  await revoke(deps, await sessionsOfUser(deps.db, user.id));
  await deps.db.transaction(async (tx) => {
    await tx.query(sql`DELETE FROM rbac.users WHERE id = ${user.id}`);
    await deps.outbox.record(tx, "user.deleted", null, { userId: user.id, userName: user.user_name });
  });
  return noContent();
};

/** Everything stored about a user: the data export. */
export const exportUser: RbacHandler<"users.export"> = async (deps: RbacDeps, req) => {
  const user = await reachableUser(deps.db, req.principal, req.params.userId);
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  const memberships = await deps.db.any<{ workspaceKey: string; createdAt: Date; roles: string[] }>(sql`
    SELECT m.workspace_key AS "workspaceKey", m.created_at AS "createdAt",
           coalesce(array_agg(mr.role ORDER BY mr.role) FILTER (WHERE mr.role IS NOT NULL), '{}') AS roles
    FROM rbac.memberships m
    LEFT JOIN rbac.membership_roles mr USING (workspace_key, user_id)
    WHERE m.user_id = ${user.id} GROUP BY m.workspace_key, m.created_at ORDER BY m.workspace_key`);
  const sessions = await deps.db.any<{
    id: string;
    workspaceKey: string | null;
    roles: string[];
    createdAt: Date;
    expiresAt: Date;
    revokedAt: Date | null;
  }>(sql`
    SELECT id, workspace_key AS "workspaceKey", roles, created_at AS "createdAt", expires_at AS "expiresAt",
           revoked_at AS "revokedAt"
    FROM rbac.sessions WHERE user_id = ${user.id} ORDER BY created_at`);
  return ok({
    exportedAtUtc: new Date().toISOString(),
    user: userView(user),
    memberships: memberships.map((m) => ({
      workspaceKey: m.workspaceKey,
      roles: m.roles,
      createdAtUtc: m.createdAt.toISOString(),
    })),
    sessions: sessions.map((x) => ({
      id: x.id,
      workspaceKey: x.workspaceKey,
      roles: x.roles,
      createdAtUtc: x.createdAt.toISOString(),
      expiresAtUtc: x.expiresAt.toISOString(),
      revokedAtUtc: iso(x.revokedAt),
    })),
  });
};
