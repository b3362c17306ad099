/**
 * Global users: a platform session reaches every user, a workspace session its workspace's
 * members (reads only: user writes and the data export are platform-only). Lists page by the lower-cased
 * user name.
 */
import { randomUUID } from "node:crypto";

import { reachCondition } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { PlatformEventData, RouteHandlerWith } from "@svc/contracts";
import { type Db, isUniqueViolation, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import type { Outbox } from "@svc/outbox";

import { noContent, ok, type RbacRoutes } from "./deps.js";
import type { Passwords } from "./passwords.js";
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

/** The user as events describe it. */
function publicUser(u: UserRow) {
  return { userId: u.id, userName: u.user_name, displayName: u.display_name, email: u.email };
}

/**
 * What the user routes ask of their tables (the rules, reach aside, stay in the handlers). Each change
 * records its event in the transaction of the change.
 */
export interface UserTables {
  /** One page of the users `principal` reaches, by lower-cased user name. */
  page(principal: Principal, query: { limit?: number; cursor?: string }): Promise<Page<UserRow>>;
  /** The user if `principal` reaches it (every user for a platform session, its members otherwise). */
  reachable(principal: Principal, userId: string): Promise<UserRow | null>;
  /** Adds a user and records `user.created`; a taken user name is a ConflictError. */
  create(user: NewUser): Promise<UserRow>;
  /** Changes what is given (an `email` of null removes it) and records `user.updated`; null when gone. */
  update(userId: string, change: UserChange): Promise<UserRow | null>;
  /** Turns a user on or off and records `user.updated` with `isActive`; null when gone. */
  setActive(userId: string, isActive: boolean): Promise<UserRow | null>;
  /** Deletes a user and records `user.deleted`. */
  remove(user: UserRow): Promise<void>;
  /** The roles a user holds: its global role and every member role, with their keys. */
  rolesOf(userId: string): Promise<Array<{ name: string; permissions: string[] }>>;
  /** The user's sessions that are still good (to revoke). */
  openSessions(userId: string): Promise<Array<{ id: string; expires_at: Date }>>;
  /** Its memberships and all its sessions, for the data export. */
  exportOf(userId: string): Promise<UserExport>;
}

export interface Page<T> {
  readonly items: T[];
  readonly nextCursor: string | null;
}
export interface NewUser {
  readonly userName: string;
  readonly displayName: string;
  readonly email: string | null;
  readonly passwordHash: string;
}
export interface UserChange {
  readonly displayName?: string;
  readonly email?: string | null;
  readonly passwordHash: string | null;
}
export interface UserExport {
  readonly memberships: Array<{ workspaceKey: string; createdAt: Date; roles: string[] }>;
  readonly sessions: Array<{
    id: string;
    workspaceKey: string | null;
    roles: string[];
    createdAt: Date;
    expiresAt: Date;
    revokedAt: Date | null;
  }>;
}

/** The user tables in PostgreSQL, their events in rbac's outbox. */
export function userTables(db: Db, outbox: Outbox<PlatformEventData>): UserTables {
  return {
    page: (principal, query) => listUserRows(db, principal, query),
    reachable: (principal, userId) =>
      db.maybeOne<UserRow>(
        sql`SELECT u.* FROM rbac.users u WHERE u.id = ${userId} AND ${reachFilter(principal)}`,
      ),
    create: async (u) => {
      try {
        return await db.transaction(async (tx) => {
          const row = await tx.one<UserRow>(sql`
            INSERT INTO rbac.users (id, user_name, display_name, email, password_hash)
            VALUES (${randomUUID()}, ${u.userName}, ${u.displayName}, ${u.email}, ${u.passwordHash})
            RETURNING *`);
          await outbox.record(tx, "user.created", null, publicUser(row));
          return row;
        });
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConflictError(`The user name '${u.userName}' is taken.`);
        throw error;
      }
    },
    update: (userId, c) =>
      db.transaction(async (tx) => {
        const row = await tx.maybeOne<UserRow>(sql`
          UPDATE rbac.users SET
            display_name = coalesce(${c.displayName ?? null}, display_name),
            email = CASE WHEN ${c.email !== undefined} THEN ${c.email ?? null} ELSE email END,
            password_hash = coalesce(${c.passwordHash}, password_hash),
            updated_at = now()
          WHERE id = ${userId} RETURNING *`);
        if (row !== null) await outbox.record(tx, "user.updated", null, publicUser(row));
        return row;
      }),
    setActive: (userId, isActive) =>
      db.transaction(async (tx) => {
        const row = await tx.maybeOne<UserRow>(sql`
          UPDATE rbac.users SET is_active = ${isActive}, updated_at = now() WHERE id = ${userId} RETURNING *`);
        if (row !== null)
          await outbox.record(tx, "user.updated", null, { ...publicUser(row), isActive: row.is_active });
        return row;
      }),
    remove: (user) =>
      db.transaction(async (tx) => {
        await tx.query(sql`DELETE FROM rbac.users WHERE id = ${user.id}`);
        await outbox.record(tx, "user.deleted", null, { userId: user.id, userName: user.user_name });
      }),
    rolesOf: (userId) => rolesOfUser(db, userId),
    openSessions: (userId) => sessionsOfUser(db, userId),
    exportOf: async (userId) => ({
      memberships: await db.any(sql`
        SELECT m.workspace_key AS "workspaceKey", m.created_at AS "createdAt",
               coalesce(array_agg(mr.role ORDER BY mr.role) FILTER (WHERE mr.role IS NOT NULL), '{}') AS roles
        FROM rbac.memberships m
        LEFT JOIN rbac.membership_roles mr USING (workspace_key, user_id)
        WHERE m.user_id = ${userId} GROUP BY m.workspace_key, m.created_at ORDER BY m.workspace_key`),
      sessions: await db.any(sql`
        SELECT id, workspace_key AS "workspaceKey", roles, created_at AS "createdAt", expires_at AS "expiresAt",
               revoked_at AS "revokedAt"
        FROM rbac.sessions WHERE user_id = ${userId} ORDER BY created_at`),
    }),
  };
}

/** What the user handlers are given: the tables, and the revocation of sessions at every gateway. */
export interface UserDeps {
  readonly users: UserTables;
  readonly revokeSessions: (sessions: ReadonlyArray<{ id: string; expires_at: Date }>) => Promise<void>;
  /** New passwords are hashed at the configured cost. */
  readonly passwords: Pick<Passwords, "hash">;
}
type UserHandler<K extends keyof RbacRoutes> = RouteHandlerWith<UserDeps, RbacRoutes[K]>;

async function reachedUser(deps: UserDeps, principal: Principal, userId: string): Promise<UserRow> {
  const user = await deps.users.reachable(principal, userId);
  if (user === null) throw new NotFoundError(`User '${userId}' was not found.`);
  return user;
}

/** Refuses (403) a change to a user who holds a right the caller does not. */
export async function requireNotMorePowerfulThan(
  deps: { readonly users: Pick<UserTables, "rolesOf"> },
  principal: Principal,
  userId: string,
) {
  if (outranks(principal, await deps.users.rolesOf(userId))) throw moreRights();
}

export const listUsers: UserHandler<"users.list"> = async (deps, req) => {
  const page = await deps.users.page(req.principal, req.query);
  return ok({ items: page.items.map(userView), nextCursor: page.nextCursor });
};

export const getUser: UserHandler<"users.get"> = async (deps, req) =>
  ok(userView(await reachedUser(deps, req.principal, req.params.userId)));

export const createUser: UserHandler<"users.create"> = async (deps, req) => {
  const body = req.body;
  const user = await deps.users.create({
    userName: body.userName,
    displayName: body.displayName ?? "",
    email: body.email ?? null,
    passwordHash: await deps.passwords.hash(body.password),
  });
  return ok(userView(user), 201);
};

/**
 * Whether a user's roles hold a right the caller does not: a key of its global role or of any member role
 * that the caller lacks, a `*` grant, or superadmin. A caller that is a superadmin (or holds `*`) lacks
 * nothing.
 */
export function outranks(
  principal: Principal,
  roles: ReadonlyArray<{ name: string; permissions: readonly string[] }>,
): boolean {
  if (principal.roles.includes("superadmin") || principal.permissions.includes("*")) return false;
  const held = new Set(principal.permissions);
  return roles.some(
    (r) => r.name === "superadmin" || r.permissions.some((key) => key === "*" || !held.has(key)),
  );
}

/**
 * The roles a user holds, with their keys: the global role and the member roles, of every workspace or,
 * with `workspaceKey`, of that one only.
 */
export function rolesOfUser(db: Queries, userId: string, workspaceKey?: string) {
  return db.any<{ name: string; permissions: string[] }>(sql`
    SELECT r.name, r.permissions FROM rbac.users u JOIN rbac.roles r ON r.name = u.global_role
    WHERE u.id = ${userId}
    UNION ALL
    SELECT r.name, r.permissions FROM rbac.membership_roles mr JOIN rbac.roles r ON r.name = mr.role
    WHERE mr.user_id = ${userId}
      AND ${workspaceKey === undefined ? sql`TRUE` : sql`mr.workspace_key = ${workspaceKey}`}`);
}

/**
 * No one grants past their own rights: a caller defines, changes, deletes or assigns a role, or gives an
 * integration keys, only when it holds every key of them itself (`*`, and superadmin, only a superadmin or
 * a `*` holder). Without this, a holder of role.update alone could write itself a role of every key, or
 * make itself superadmin. A 403 problem naming the rule; `what` names the thing ("The role").
 */
export function refuseBeyondOwnRights(
  principal: Principal,
  what: string,
  grants: ReadonlyArray<{ readonly name: string; readonly permissions: readonly string[] }>,
): void {
  if (!outranks(principal, grants)) return;
  throw new SvcError(
    ErrorCode.Forbidden,
    `${what} holds rights you do not hold: only a caller with all of them (a superadmin for superadmin or a '*' grant) may give them.`,
    { extensions: { rule: "grant-exceeds-own-rights" } },
  );
}

/**
 * No one changes a user more powerful than themselves: a caller may change a user's
 * password, e-mail, name, activation or existence only when every key the user holds (through the global
 * role and every member role) is a key the caller holds too; a superadmin (or a `*` grant) is changed only
 * by a superadmin or a `*` holder. This is the 403 problem naming the rule.
 */
export function moreRights(): SvcError {
  return new SvcError(
    ErrorCode.Forbidden,
    "This user holds rights you do not hold: only a caller with all of them (a superadmin for a superadmin) may change the user.",
    { extensions: { rule: "target-holds-more-rights" } },
  );
}

export const updateUser: UserHandler<"users.update"> = async (deps, req) => {
  const existing = await reachedUser(deps, req.principal, req.params.userId);
  await requireNotMorePowerfulThan(deps, req.principal, existing.id);
  const body = req.body;
  const hash = body.password === undefined ? null : await deps.passwords.hash(body.password);
  const user = await deps.users.update(existing.id, {
    ...(body.displayName === undefined ? {} : { displayName: body.displayName }),
    ...(body.email === undefined ? {} : { email: body.email ?? null }),
    passwordHash: hash,
  });
  // Deleted by a concurrent request since it was read.
  if (user === null) throw new NotFoundError(`User '${existing.id}' was not found.`);
  // A new password ends every session signed in with the old one.
  if (hash !== null) await deps.revokeSessions(await deps.users.openSessions(user.id));
  return ok(userView(user));
};

export const setUserActivation: UserHandler<"users.activation"> = async (deps, req) => {
  const existing = await reachedUser(deps, req.principal, req.params.userId);
  await requireNotMorePowerfulThan(deps, req.principal, existing.id);
  const user = await deps.users.setActive(existing.id, req.query.isActive);
  if (user === null) throw new NotFoundError(`User '${existing.id}' was not found.`);
  if (!user.is_active) await deps.revokeSessions(await deps.users.openSessions(user.id));
  return ok(userView(user));
};

export const deleteUser: UserHandler<"users.delete"> = async (deps, req) => {
  const user = await reachedUser(deps, req.principal, req.params.userId);
  await requireNotMorePowerfulThan(deps, req.principal, user.id);
  // Revoked first: a revocation that fails leaves the user, so a retry finds and revokes them again.
  await deps.revokeSessions(await deps.users.openSessions(user.id));
  await deps.users.remove(user);
  return noContent();
};

/** Everything stored about a user: the data export. */
export const exportUser: UserHandler<"users.export"> = async (deps, req) => {
  const user = await reachedUser(deps, req.principal, req.params.userId);
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  const { memberships, sessions } = await deps.users.exportOf(user.id);
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
