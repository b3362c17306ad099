/**
 * What rbac seeds: at every start (idempotently) the core keys, the system roles and the roles of
 * BackendHost:RbacRoles; on request the one-time bootstrap operator and the development stack's demo
 * operator. The scripts call these (`make bootstrap-operator`, `make dev`): rbac's tables are written by
 * rbac's code only, and every operator gets superadmin the same way.
 */
import { randomBytes, randomUUID } from "node:crypto";

import { CORE_PERMISSION_KEYS, SYSTEM_ROLES, SystemRole } from "@svc/access";
import { type Db, isUniqueViolation, type Queries, sql } from "@svc/db";
import { ConflictError } from "@svc/errors";

import { hashPassword } from "./passwords.js";
import type { RbacConfig } from "./settings.js";

/** Seeds (idempotently, at every start) the core keys, the system roles and roles from settings. */
export async function seedAccess(
  db: Db,
  rbacRoles: RbacConfig["backendHost"]["rbacRoles"] = [],
): Promise<void> {
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
    for (const role of rbacRoles) {
      await tx.query(sql`
        INSERT INTO rbac.roles (name, description, scope, permissions, source)
        VALUES (${role.name}, 'Configured in BackendHost:RbacRoles', 'platform', ${[...role.permissions]}::text[], 'config')
        ON CONFLICT (name) DO UPDATE SET permissions = excluded.permissions, updated_at = now()
        WHERE rbac.roles.source <> 'system'`);
    }
  });
}

async function insertOperator(tx: Queries, userName: string, displayName: string, password: string) {
  const id = randomUUID();
  await tx.query(sql`
    INSERT INTO rbac.users (id, user_name, display_name, password_hash, global_role)
    VALUES (${id}, ${userName}, ${displayName}, ${await hashPassword(password)}, ${SystemRole.SuperAdmin})`);
  return id;
}

/**
 * The one-time bootstrap of the first platform operator: a user with the superadmin global role and a
 * random password, returned once. 409 when a superadmin exists already (further operators are created
 * through the API), unless `force`; 409 when the name is taken.
 */
export async function bootstrapOperator(
  db: Db,
  userName: string,
  options: { force?: boolean } = {},
): Promise<{ password: string }> {
  await seedAccess(db);
  const password = randomBytes(18).toString("base64url");
  try {
    await db.transaction(async (tx) => {
      const existing = await tx.maybeOne(
        sql`SELECT 1 AS one FROM rbac.users WHERE global_role = ${SystemRole.SuperAdmin} LIMIT 1`,
      );
      if (existing !== null && options.force !== true) {
        throw new ConflictError(
          "A platform operator exists already: create further operators through the API (or pass --force).",
        );
      }
      await insertOperator(tx, userName, "Bootstrap operator", password);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`A user named '${userName}' exists already.`);
    throw error;
  }
  return { password };
}

/**
 * The development stack's demo operator (idempotent): a superadmin, and a member of `workspaceKey` with
 * the admin role. Never called outside development.
 */
export async function seedDemoOperator(
  db: Db,
  demo: { userName: string; password: string; workspaceKey: string },
): Promise<void> {
  await seedAccess(db);
  await db.transaction(async (tx) => {
    const existing = await tx.maybeOne<{ id: string }>(
      sql`SELECT id FROM rbac.users WHERE lower(user_name) = lower(${demo.userName})`,
    );
    const id = existing?.id ?? (await insertOperator(tx, demo.userName, "Demo operator", demo.password));
    await tx.query(sql`
      INSERT INTO rbac.memberships (workspace_key, user_id) VALUES (${demo.workspaceKey}, ${id})
      ON CONFLICT DO NOTHING`);
    await tx.query(sql`
      INSERT INTO rbac.membership_roles (workspace_key, user_id, role)
      VALUES (${demo.workspaceKey}, ${id}, ${SystemRole.Admin}) ON CONFLICT DO NOTHING`);
  });
}

/**
 * Users whose global role is a workspace-scope role (refused since, and such a role gives
 * no platform session at sign-in): reported at start-up so an operator can fix them. Returns their names.
 */
export async function reportWorkspaceGlobalRoles(
  db: Queries,
  log: { warn(details: object, message: string): void },
): Promise<string[]> {
  const rows = await db.any<{ user_name: string; role: string }>(sql`
    SELECT u.user_name, r.name AS role FROM rbac.users u JOIN rbac.roles r ON r.name = u.global_role
    WHERE r.scope <> 'platform' ORDER BY u.user_name LIMIT 100`);
  if (rows.length > 0) {
    log.warn(
      { users: rows.map((r) => `${r.user_name} (${r.role})`) },
      "users hold a workspace-scope role as their global role: it gives them no platform session; assign a platform role (PUT /api/rbac/users/{id}) or remove it",
    );
  }
  return rows.map((r) => r.user_name);
}
