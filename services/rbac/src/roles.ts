/**
 * Roles, the permission-key catalogue and users' global role assignments. All platform-only (their
 * contracts say so, and the runtime checks it before a handler runs): a role change reaches every workspace. Changing a role revokes the sessions that hold it (their keys were
 * copied at sign-in) and tells the gateways.
 */
import { SYSTEM_ROLES, SystemRole, WILDCARD } from "@svc/access";
import { type Queries, sql, withRetry } from "@svc/db";
import { ConflictError, ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";

import { noContent, ok, type RbacHandler, revoke } from "./deps.js";
import {
  findRole,
  findUser,
  listRoles,
  type RoleRow,
  roleView,
  sessionsHoldingRole,
  sessionsOfUser,
} from "./repository.js";
import { listUserRows } from "./users.js";

/** Every key a grant may name: the catalogue's and `*`. */
export async function knownKeys(db: Queries): Promise<Set<string>> {
  const rows = await db.any<{ key: string }>(sql`SELECT key FROM rbac.permission_keys`);
  return new Set([WILDCARD, ...rows.map((r) => r.key)]);
}

export const listRolesRoute: RbacHandler<"roles.list"> = async (deps) => {
  return ok((await listRoles(deps.db)).map(roleView));
};

const permissionKeys = (db: Queries) =>
  db.any<{ key: string; source: string; description: string }>(
    sql`SELECT key, source, description FROM rbac.permission_keys ORDER BY key`,
  );

export const listPermissionKeys: RbacHandler<"permissions.list"> = async (deps) => {
  return ok(await permissionKeys(deps.db));
};

export const listSecurityPermissionKeys: RbacHandler<"security.permissions.list"> = async (deps) => {
  return ok(await permissionKeys(deps.db));
};

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

export const putRole: RbacHandler<"roles.put"> = async (deps, req) => {
  const name = req.params.role;
  if (name === SystemRole.SuperAdmin) throw new ConflictError("The superadmin role cannot be changed.");
  refuseSystemRoleChange(name, req.body);
  const known = await knownKeys(deps.db);
  const unknown = req.body.permissions.filter((k) => !known.has(k));
  if (unknown.length > 0) {
    throw new ValidationError(
      unknown.map((k) => ({ field: "/body/permissions", message: `unknown permission key '${k}'` })),
    );
  }
  // Sign-ins hold share locks on the role's row: a deadlock with one of them (40P01) runs this again.
  const { role, existed } = await withRetry(
    () =>
      deps.db.transaction(async (tx) => {
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
      }),
    { retries: 3 },
  );
  if (existed) await revoke(deps, await sessionsHoldingRole(deps.db, name));
  deps.announceRoleChange(name);
  return ok(roleView(role), existed ? 200 : 201);
};

export const deleteRole: RbacHandler<"roles.delete"> = async (deps, req) => {
  const role = await findRole(deps.db, req.params.role);
  if (role === null) throw new NotFoundError(`Role '${req.params.role}' was not found.`);
  if (role.source === "system") throw new ConflictError(`The system role '${role.name}' cannot be deleted.`);
  // Delete first (it waits for sign-ins holding the role's row), then revoke every session that carries
  // the role: sessions record their roles, so they are found after the role is gone.
  await withRetry(() => deps.db.query(sql`DELETE FROM rbac.roles WHERE name = ${role.name}`), { retries: 3 });
  await revoke(deps, await sessionsHoldingRole(deps.db, role.name));
  deps.announceRoleChange(role.name);
  return noContent();
};

// Global role assignments are the platform's: the caller's own principal decides, never a stand-in.

export const listAssignments: RbacHandler<"role-assignments.list"> = async (deps, req) => {
  const page = await listUserRows(deps.db, req.principal, req.query);
  return ok({
    items: page.items.map((u) => ({ userId: u.id, userName: u.user_name, role: u.global_role })),
    nextCursor: page.nextCursor,
  });
};

export const putAssignment: RbacHandler<"role-assignments.put"> = async (deps, req) => {
  const user = await findUser(deps.db, req.params.userId);
  if (user === null) throw new NotFoundError(`User '${req.params.userId}' was not found.`);
  const role = await findRole(deps.db, req.body.role);
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
  await deps.db.query(
    sql`UPDATE rbac.users SET global_role = ${role.name}, updated_at = now() WHERE id = ${user.id}`,
  );
  if (user.global_role !== role.name) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return ok({ userId: user.id, userName: user.user_name, role: role.name });
};

export const deleteAssignment: RbacHandler<"role-assignments.delete"> = async (deps, req) => {
  const user = await findUser(deps.db, req.params.userId);
  if (user === null) throw new NotFoundError(`User '${req.params.userId}' was not found.`);
  await deps.db.query(
    sql`UPDATE rbac.users SET global_role = NULL, updated_at = now() WHERE id = ${user.id}`,
  );
  if (user.global_role !== null) await revoke(deps, await sessionsOfUser(deps.db, user.id));
  return noContent();
};
