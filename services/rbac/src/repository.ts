/** The rbac schema's SQL, next to the functions that run it. */
import { deleteOlderThan, type Queries, sql, type SweepOptions } from "@svc/db";

export interface UserRow {
  id: string;
  user_name: string;
  display_name: string;
  email: string | null;
  password_hash: string | null;
  is_active: boolean;
  global_role: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface RoleRow {
  name: string;
  description: string;
  scope: "platform" | "workspace";
  permissions: string[];
  source: string;
}

export function userView(u: UserRow) {
  return {
    id: u.id,
    userName: u.user_name,
    displayName: u.display_name,
    email: u.email,
    isActive: u.is_active,
    role: u.global_role,
    createdAtUtc: u.created_at.toISOString(),
    updatedAtUtc: u.updated_at.toISOString(),
  };
}

export function roleView(r: RoleRow) {
  return {
    name: r.name,
    description: r.description,
    scope: r.scope,
    permissions: r.permissions,
    source: r.source,
  };
}

export const findUserByName = (db: Queries, userName: string) =>
  db.maybeOne<UserRow>(sql`SELECT * FROM rbac.users WHERE lower(user_name) = lower(${userName})`);

export const findUser = (db: Queries, id: string) =>
  db.maybeOne<UserRow>(sql`SELECT * FROM rbac.users WHERE id = ${id}`);

export const findRole = (db: Queries, name: string) =>
  db.maybeOne<RoleRow>(sql`SELECT * FROM rbac.roles WHERE name = ${name}`);

export const listRoles = (db: Queries) => db.any<RoleRow>(sql`SELECT * FROM rbac.roles ORDER BY name`);

export async function isMember(db: Queries, workspaceKey: string, userId: string): Promise<boolean> {
  const row = await db.maybeOne(
    sql`SELECT 1 FROM rbac.memberships WHERE workspace_key = ${workspaceKey} AND user_id = ${userId}`,
  );
  return row !== null;
}

/** Permission keys of the member's roles in one workspace. */
export async function memberRoleKeys(db: Queries, workspaceKey: string, userId: string) {
  return db.any<{ role: string; permissions: string[] }>(sql`
    SELECT mr.role, r.permissions FROM rbac.membership_roles mr JOIN rbac.roles r ON r.name = mr.role
    WHERE mr.workspace_key = ${workspaceKey} AND mr.user_id = ${userId} ORDER BY mr.role`);
}

/** Sessions still valid whose holder has the role (globally or as a member role). */
export async function sessionsHoldingRole(db: Queries, role: string) {
  return db.any<{ id: string; expires_at: Date }>(sql`
    SELECT id::text, expires_at FROM rbac.sessions
    WHERE revoked_at IS NULL AND expires_at > now()
      AND (roles @> ARRAY[${role}]::text[]
           OR user_id IN (SELECT id FROM rbac.users WHERE global_role = ${role})
           OR user_id IN (SELECT user_id FROM rbac.membership_roles WHERE role = ${role}))`);
}

/** Sessions still valid of one user (optionally: in one workspace only). */
export async function sessionsOfUser(db: Queries, userId: string, workspaceKey?: string) {
  return db.any<{ id: string; expires_at: Date }>(sql`
    SELECT id::text, expires_at FROM rbac.sessions
    WHERE revoked_at IS NULL AND expires_at > now() AND user_id = ${userId}
      AND (${workspaceKey ?? null}::text IS NULL OR workspace_key = ${workspaceKey ?? null}::text)`);
}

/**
 * Deletes the sessions that expired more than `days` ago: no token of theirs is accepted any more, and
 * none is in the revocation bucket. Returns how many it deleted.
 */
export const deleteExpiredSessions = (db: Queries, days: number, options: SweepOptions = {}) =>
  deleteOlderThan(db, "rbac.sessions", "expires_at", days, options);

/** Deletes the notifications made more than `days` ago, read or not. Returns how many it deleted. */
export const deleteOldNotifications = (db: Queries, days: number, options: SweepOptions = {}) =>
  deleteOlderThan(db, "rbac.notifications", "created_at", days, options);
