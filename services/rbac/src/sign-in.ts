/**
 * Sign-in: checks the password and the account, derives the session's scope, roles and
 * keys, records the session and issues its access token.
 *
 * Sign-in asks a `SignInTables` port (`signInTables` is the PostgreSQL one), so its rules are unit-tested
 * with the tables in memory.
 */
import { randomUUID } from "node:crypto";

import { type AccessClaims, filterWorkspaceKeys, SystemRole } from "@svc/access";
import { type LoginRequest, refuseClosedWorkspace, workspaceStateOf } from "@svc/contracts";
import { type Db, sql, withRetry } from "@svc/db";
import { UnauthenticatedError } from "@svc/errors";

import type { RbacDeps } from "./deps.js";
import { type Passwords, verifyPassword } from "./passwords.js";
import { findUserByName, isMember, type RoleRow, type UserRow } from "./repository.js";
import type { TokenIssuer } from "./tokens.js";

const INVALID_LOGIN = "Invalid user name or password.";

/** What recording a session asks of the tables: each read share-locks what it reads until the end. */
export interface SessionTables {
  user(id: string): Promise<UserRow | null>;
  isMember(workspaceKey: string, userId: string): Promise<boolean>;
  /** The member's roles in the workspace, by name, with their keys. */
  memberRoles(
    workspaceKey: string,
    userId: string,
  ): Promise<Array<{ readonly role: string; readonly permissions: string[] }>>;
  role(name: string): Promise<RoleRow | null>;
  record(session: {
    readonly id: string;
    readonly userId: string;
    readonly workspaceKey: string | null;
    readonly roles: readonly string[];
    readonly lifetimeSeconds: number;
  }): Promise<void>;
}

/** The tables sign-in reads and writes. */
export interface SignInTables {
  /** The user of that name (case-insensitive), or null. */
  userByName(userName: string): Promise<UserRow | null>;
  isMember(workspaceKey: string, userId: string): Promise<boolean>;
  /** Runs `open` as one change; run again from the start when it deadlocks with another (40P01). */
  session<T>(open: (tables: SessionTables) => Promise<T>): Promise<T>;
  /**
   * Replaces the user's password hash `from` by `to`, the same password hashed at the configured cost;
   * nothing when the hash is no longer `from` (the password changed meanwhile).
   */
  rehash(userId: string, from: string, to: string): Promise<void>;
  /** The session of that id if it is the user's and not revoked (expired or not), else null. */
  openSession(sessionId: string, userId: string): Promise<{ id: string; expires_at: Date } | null>;
}

export interface SignInDeps extends Pick<RbacDeps, "tenancy" | "activePlugins" | "log"> {
  readonly signIn: SignInTables;
  readonly issuer: Pick<TokenIssuer, "sign">;
  /** The decoy an unknown user's sign-in verifies against; the configured cost a stored hash is renewed to. */
  readonly passwords: Pick<Passwords, "decoy" | "current" | "hash">;
  /** The access token's lifetime now (a setting). */
  readonly lifetimeSeconds: () => number;
}

/** The PostgreSQL sign-in tables. */
export function signInTables(db: Db): SignInTables {
  return {
    userByName: (userName) => findUserByName(db, userName),
    isMember: (workspaceKey, userId) => isMember(db, workspaceKey, userId),
    async rehash(userId, from, to) {
      // Not a change anyone made: updated_at stays, and no session is revoked.
      await db.query(sql`
        UPDATE rbac.users SET password_hash = ${to} WHERE id = ${userId}::uuid AND password_hash = ${from}`);
    },
    openSession: (sessionId, userId) =>
      db.maybeOne<{ id: string; expires_at: Date }>(sql`
        SELECT id::text, expires_at FROM rbac.sessions
        WHERE id = ${sessionId}::uuid AND user_id::text = ${userId} AND revoked_at IS NULL`),
    session: (open) =>
      withRetry(
        () =>
          db.transaction((tx) =>
            open({
              user: (id) => tx.maybeOne<UserRow>(sql`SELECT * FROM rbac.users WHERE id = ${id} FOR SHARE`),
              async isMember(workspaceKey, userId) {
                const member = await tx.maybeOne(sql`
                  SELECT 1 AS one FROM rbac.memberships
                  WHERE workspace_key = ${workspaceKey} AND user_id = ${userId} FOR SHARE`);
                return member !== null;
              },
              memberRoles: (workspaceKey, userId) =>
                tx.any<{ role: string; permissions: string[] }>(sql`
                  SELECT r.name AS role, r.permissions FROM rbac.membership_roles mr JOIN rbac.roles r ON r.name = mr.role
                  WHERE mr.workspace_key = ${workspaceKey} AND mr.user_id = ${userId} ORDER BY r.name FOR SHARE OF r`),
              role: (name) =>
                tx.maybeOne<RoleRow>(sql`SELECT * FROM rbac.roles WHERE name = ${name} FOR SHARE`),
              async record(session) {
                await tx.query(sql`
                  INSERT INTO rbac.sessions (id, user_id, workspace_key, roles, expires_at)
                  VALUES (${session.id}, ${session.userId}, ${session.workspaceKey}, ${[...session.roles]}::text[],
                          now() + make_interval(secs => ${session.lifetimeSeconds}))`);
              },
            }),
          ),
        { retries: 3 },
      ),
  };
}

/**
 * Operators' decisions stick: no session is signed in to a workspace an operator turned
 * off or whose tenant is suspended. Asked only of a member who gave the right password, so the answer
 * tells no one else anything; a workspace the resolver does not know is the uniform sign-in failure.
 */
async function requireOpenWorkspace(deps: SignInDeps, workspaceKey: string, userId: string): Promise<void> {
  if (!(await deps.signIn.isMember(workspaceKey, userId))) throw new UnauthenticatedError(INVALID_LOGIN);
  const found = (await deps.tenancy({ workspaceKeys: [workspaceKey], tenantKeys: [] })).workspaces[0];
  const state = workspaceStateOf(found);
  if (state === "unknown") throw new UnauthenticatedError(INVALID_LOGIN);
  refuseClosedWorkspace(workspaceKey, state);
}

export async function login(deps: SignInDeps, request: LoginRequest) {
  const found = await deps.signIn.userByName(request.userName);
  // Verify against a decoy hash for unknown users, so timing does not tell which part was wrong.
  const valid = await verifyPassword(
    request.password,
    found?.password_hash ?? (await deps.passwords.decoy()),
  );
  if (!valid || found === null || !found.is_active) throw new UnauthenticatedError(INVALID_LOGIN);
  const workspaceKey = request.workspaceKey?.trim() || undefined;
  if (workspaceKey !== undefined) await requireOpenWorkspace(deps, workspaceKey, found.id);
  const lifetime = deps.lifetimeSeconds();
  const sid = randomUUID();

  // The session is created under share locks on what it is derived from (the user, the membership, the
  // roles), after checking they are unchanged since the password was verified. A concurrent deactivation,
  // password change, membership removal or role change either commits first (and the sign-in fails or
  // sees the new state) or waits for this commit (and then revokes this session too).
  // Two sign-ins or a sign-in and a role change can deadlock under these locks (40P01): PostgreSQL ends
  // one transaction, and it is run again from the start.
  const { scope, roles, permissions } = await deps.signIn.session(async (tables) => {
    const user = await tables.user(found.id);
    if (
      user === null ||
      !user.is_active ||
      // Changed since it was verified: by a new password, or by another sign-in renewing the same one's
      // hash (then it verifies again).
      (user.password_hash !== found.password_hash &&
        (user.password_hash === null || !(await verifyPassword(request.password, user.password_hash))))
    ) {
      throw new UnauthenticatedError(INVALID_LOGIN);
    }
    let scope: "platform" | "workspace" | undefined;
    let roles: string[] = [];
    let permissions: string[] = [];
    if (workspaceKey !== undefined) {
      if (!(await tables.isMember(workspaceKey, user.id))) throw new UnauthenticatedError(INVALID_LOGIN);
      const rows = await tables.memberRoles(workspaceKey, user.id);
      roles = rows.map((r) => r.role).filter((r) => r !== SystemRole.SuperAdmin);
      // Plugin keys only of plugins active and in this workspace's chain, each in its own namespace.
      permissions = filterWorkspaceKeys(
        rows.flatMap((r) => r.permissions),
        deps.activePlugins(workspaceKey),
      );
      scope = "workspace";
    } else if (user.global_role !== null) {
      const role = await tables.role(user.global_role);
      // The session's scope is the role's: a workspace-scope role held as a global
      // role (refused since; reported at start-up) gives no platform session and no keys.
      if (role !== null && role.scope === "platform") {
        roles = [role.name];
        permissions = role.permissions;
        scope = "platform";
      }
    }
    await tables.record({
      id: sid,
      userId: user.id,
      workspaceKey: workspaceKey ?? null,
      roles,
      lifetimeSeconds: lifetime,
    });
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
  const accessToken = await deps.issuer.sign(claims, lifetime);
  await renewHash(deps, found, request.password);
  return { accessToken, tokenType: "Bearer" as const, expiresIn: lifetime };
}

/**
 * A hash made at another cost (before an operator changed the setting) is replaced by one at the
 * configured cost while the password is known: the account then costs what the setting says to attack,
 * and its sign-in takes as long as the decoy's, so timing does not tell it from a missing user.
 * Best effort: the sign-in has succeeded; a failure is logged and the next sign-in tries again.
 */
async function renewHash(deps: SignInDeps, user: UserRow, password: string): Promise<void> {
  const stored = user.password_hash;
  if (stored === null || deps.passwords.current(stored)) return;
  try {
    await deps.signIn.rehash(user.id, stored, await deps.passwords.hash(password));
  } catch (error) {
    deps.log.warn({ err: error, userId: user.id }, "renewing a password hash at the configured cost failed");
  }
}

/**
 * Sign-out (POST /api/auth/logout): the caller's own session, named by its token, is revoked on every
 * gateway. A session of another user, or one already revoked, is left as it is.
 */
export interface SignOutDeps {
  readonly signIn: Pick<SignInTables, "openSession">;
  /** Revokes sessions on every gateway (the revocation bucket) and in the table. */
  readonly revokeSessions: (sessions: ReadonlyArray<{ id: string; expires_at: Date }>) => Promise<void>;
}

export async function logout(
  deps: SignOutDeps,
  request: { readonly sessionId: string; readonly subject: string },
): Promise<{ revoked: boolean }> {
  const open = await deps.signIn.openSession(request.sessionId, request.subject);
  if (open !== null) await deps.revokeSessions([open]);
  return { revoked: open !== null };
}
