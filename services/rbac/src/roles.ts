/**
 * Roles, the permission-key catalogue and users' global role assignments. All platform-only (their
 * contracts say so, and the runtime checks it before a handler runs): a role change reaches every workspace. Changing a role revokes the sessions that hold it (their keys were
 * copied at sign-in) and tells the gateways.
 */
import { SYSTEM_ROLES, SystemRole, WILDCARD } from "@svc/access";
import type { RouteHandlerWith } from "@svc/contracts";
import { type Db, type Queries, sql, withRetry } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";

import { noContent, ok, type RbacRoutes } from "./deps.js";
import { findRole, listRoles, type RoleRow, roleView, sessionsHoldingRole } from "./repository.js";
import { refuseBeyondOwnRights, requireNotMorePowerfulThan, type UserTables } from "./users.js";

/** Every key a grant may name: the catalogue's and `*`. */
export async function knownKeys(db: Queries): Promise<Set<string>> {
  const rows = await db.any<{ key: string }>(sql`SELECT key FROM rbac.permission_keys`);
  return new Set([WILDCARD, ...rows.map((r) => r.key)]);
}

/** A permission key of the catalogue. */
export interface PermissionKeyRow {
  key: string;
  source: string;
  description: string;
}

/** What the role routes ask of their tables (the rules stay in the handlers). */
export interface RoleTables {
  list(): Promise<RoleRow[]>;
  find(name: string): Promise<RoleRow | null>;
  /** The catalogue, by key. */
  permissionKeys(): Promise<PermissionKeyRow[]>;
  /** Every key a grant may name: the catalogue's and `*`. */
  knownKeys(): Promise<ReadonlySet<string>>;
  /**
   * Adds the role, or changes it: its grants; its description and scope when given (a system role keeps
   * its scope). Says whether it existed.
   */
  save(
    name: string,
    change: {
      readonly permissions: readonly string[];
      readonly description: string | null;
      readonly scope: RoleRow["scope"] | null;
    },
  ): Promise<{ role: RoleRow; existed: boolean }>;
  remove(name: string): Promise<void>;
  /** The sessions still good that carry the role: signed in with it, or of a user holding it. */
  sessionsHolding(name: string): Promise<Array<{ id: string; expires_at: Date }>>;
  /** Sets a user's global role (null: none). */
  assign(userId: string, role: string | null): Promise<void>;
}

/** The role tables in PostgreSQL. */
export function roleTables(db: Db): RoleTables {
  return {
    list: () => listRoles(db),
    find: (name) => findRole(db, name),
    permissionKeys: () =>
      db.any<PermissionKeyRow>(sql`SELECT key, source, description FROM rbac.permission_keys ORDER BY key`),
    knownKeys: () => knownKeys(db),
    // Sign-ins hold share locks on the role's row: a deadlock with one of them (40P01) runs this again.
    save: (name, change) =>
      withRetry(
        () =>
          db.transaction(async (tx) => {
            const before = await findRole(tx, name);
            const role = await tx.one<RoleRow>(sql`
              INSERT INTO rbac.roles (name, description, scope, permissions, source)
              VALUES (${name}, ${change.description ?? ""}, ${change.scope ?? "platform"},
                      ${[...change.permissions]}::text[], 'api')
              ON CONFLICT (name) DO UPDATE SET
                permissions = excluded.permissions,
                description = coalesce(${change.description}, rbac.roles.description),
                scope = CASE WHEN rbac.roles.source = 'system' THEN rbac.roles.scope
                             ELSE coalesce(${change.scope}, rbac.roles.scope) END,
                updated_at = now()
              RETURNING *`);
            return { role, existed: before !== null };
          }),
        { retries: 3 },
      ),
    remove: async (name) => {
      await withRetry(() => db.query(sql`DELETE FROM rbac.roles WHERE name = ${name}`), { retries: 3 });
    },
    sessionsHolding: (name) => sessionsHoldingRole(db, name),
    assign: async (userId, role) => {
      await db.query(
        sql`UPDATE rbac.users SET global_role = ${role}, updated_at = now() WHERE id = ${userId}`,
      );
    },
  };
}

/** What the role handlers are given. */
export interface RoleDeps {
  readonly roles: RoleTables;
  /** For the global role assignments (every route here is a platform session's: it reaches every user). */
  readonly users: Pick<UserTables, "page" | "reachable" | "openSessions" | "rolesOf">;
  readonly revokeSessions: (sessions: ReadonlyArray<{ id: string; expires_at: Date }>) => Promise<void>;
  /** Tells every gateway, once the change is made, that sessions holding the role changed. */
  readonly announceRoleChange: (role: string) => void;
}
type RoleHandler<K extends keyof RbacRoutes> = RouteHandlerWith<RoleDeps, RbacRoutes[K]>;

export const listRolesRoute: RoleHandler<"roles.list"> = async (deps) =>
  ok((await deps.roles.list()).map(roleView));

export const listPermissionKeys: RoleHandler<"permissions.list"> = async (deps) =>
  ok(await deps.roles.permissionKeys());

export const listSecurityPermissionKeys: RoleHandler<"security.permissions.list"> = async (deps) =>
  ok(await deps.roles.permissionKeys());

/**
 * What an operator may change of a system role (docs/operator-guide.md): of superadmin
 * nothing; of admin only its description (its grants are fixed: membership.read, membership.update,
 * membership.delete and user.read, never a user write key); of host.api its grants and description. No
 * system role's scope changes. Anything else is a 409 naming the rule.
 */
function refuseSystemRoleChange(
  name: string,
  body: { readonly permissions: readonly string[]; readonly scope?: string },
): void {
  const system = SYSTEM_ROLES.find((r) => r.name === name);
  if (system === undefined) return;
  if (body.scope !== undefined && body.scope !== system.scope) {
    throw new SvcError(
      ErrorCode.Conflict,
      `The scope of the system role '${name}' is ${system.scope} and cannot be changed.`,
      {
        extensions: { rule: "system-role-scope", role: name },
      },
    );
  }
  if (name === SystemRole.Admin) {
    const fixed = [...system.permissions].sort();
    const asked = [...new Set(body.permissions)].sort();
    if (fixed.length !== asked.length || fixed.some((k, i) => k !== asked[i])) {
      throw new SvcError(
        ErrorCode.Conflict,
        `The grants of the system role 'admin' are fixed by the spec (${fixed.join(", ")}); only its description can be changed. Give other keys through a role of your own.`,
        { extensions: { rule: "system-role-grants", role: name, permissions: fixed } },
      );
    }
  }
}

export const putRole: RoleHandler<"roles.put"> = async (deps, req) => {
  const name = req.params.role;
  if (name === SystemRole.SuperAdmin) throw new ConflictError("The superadmin role cannot be changed.");
  refuseSystemRoleChange(name, req.body);
  const known = await deps.roles.knownKeys();
  const unknown = req.body.permissions.filter((k) => !known.has(k));
  if (unknown.length > 0) {
    throw new ValidationError(
      unknown.map((k) => ({ field: "/body/permissions", message: `unknown permission key '${k}'` })),
    );
  }
  // What it grants now and what it would grant: taking keys away from a role the caller could not have
  // written takes rights from its holders.
  const before = await deps.roles.find(name);
  refuseBeyondOwnRights(req.principal, "The role", [
    { name, permissions: req.body.permissions },
    ...(before === null ? [] : [before]),
  ]);
  const { role, existed } = await deps.roles.save(name, {
    permissions: req.body.permissions,
    description: req.body.description ?? null,
    scope: req.body.scope ?? null,
  });
  if (existed) await deps.revokeSessions(await deps.roles.sessionsHolding(name));
  deps.announceRoleChange(name);
  return ok(roleView(role), existed ? 200 : 201);
};

export const deleteRole: RoleHandler<"roles.delete"> = async (deps, req) => {
  const role = await deps.roles.find(req.params.role);
  if (role === null) throw new NotFoundError(`Role '${req.params.role}' was not found.`);
  if (role.source === "system") throw new ConflictError(`The system role '${role.name}' cannot be deleted.`);
  refuseBeyondOwnRights(req.principal, "The role", [role]);
  // Delete first (it waits for sign-ins holding the role's row), then revoke every session that carries
  // the role: sessions record their roles, so they are found after the role is gone.
  await deps.roles.remove(role.name);
  await deps.revokeSessions(await deps.roles.sessionsHolding(role.name));
  deps.announceRoleChange(role.name);
  return noContent();
};

// Global role assignments are the platform's: the caller's own principal decides, never a stand-in.

export const listAssignments: RoleHandler<"role-assignments.list"> = async (deps, req) => {
  const page = await deps.users.page(req.principal, req.query);
  return ok({
    items: page.items.map((u) => ({ userId: u.id, userName: u.user_name, role: u.global_role })),
    nextCursor: page.nextCursor,
  });
};

export const putAssignment: RoleHandler<"role-assignments.put"> = async (deps, req) => {
  const user = await deps.users.reachable(req.principal, req.params.userId);
  if (user === null) throw new NotFoundError(`User '${req.params.userId}' was not found.`);
  const role = await deps.roles.find(req.body.role);
  if (role === null)
    throw new ValidationError([{ field: "/body/role", message: `unknown role '${req.body.role}'` }]);
  // A global role is a platform-scope role: a workspace role's rights come per
  // workspace through membership, never platform-wide.
  if (role.scope !== "platform") {
    throw new ValidationError([
      {
        field: "/body/role",
        message: `'${role.name}' is a workspace-scope role: a global role must be a platform-scope role (give it as a member role instead)`,
      },
    ]);
  }
  refuseBeyondOwnRights(req.principal, "The role", [role]);
  // Nor does anyone change the global role of a user who holds rights the caller lacks (a demotion).
  await requireNotMorePowerfulThan(deps, req.principal, user.id);
  await deps.roles.assign(user.id, role.name);
  if (user.global_role !== role.name) await deps.revokeSessions(await deps.users.openSessions(user.id));
  return ok({ userId: user.id, userName: user.user_name, role: role.name });
};

export const deleteAssignment: RoleHandler<"role-assignments.delete"> = async (deps, req) => {
  const user = await deps.users.reachable(req.principal, req.params.userId);
  if (user === null) throw new NotFoundError(`User '${req.params.userId}' was not found.`);
  await requireNotMorePowerfulThan(deps, req.principal, user.id);
  await deps.roles.assign(user.id, null);
  if (user.global_role !== null) await deps.revokeSessions(await deps.users.openSessions(user.id));
  return noContent();
};
