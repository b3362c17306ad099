/**
 * Memberships and member roles (workspace administration uses `membership.*`). The gateway limits
 * a workspace session to its own workspace, and every handler checks the same again with the caller's
 * principal. Changing a member's roles or removing a member revokes their sessions in that workspace.
 */
import { filterWorkspaceKeys, reachOf, SystemRole, WILDCARD } from "@svc/access";
import type { Principal } from "@svc/bus";
import { isForeignKeyViolation, type Queries, sql } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";

import { noContent, ok, type RbacDeps, type RbacHandler, revoke } from "./deps.js";
import {
  findUser,
  isMember,
  listRoles,
  memberRoleKeys,
  sessionsOfUser,
  type UserRow,
  userView,
} from "./repository.js";
import { holdsMoreRights, listUserRows } from "./users.js";

async function memberRoles(db: Queries, workspaceKey: string, userId: string) {
  return (await memberRoleKeys(db, workspaceKey, userId)).map((r) => r.role);
}

const notAMember = (workspaceKey: string, userId: string) =>
  new NotFoundError(`User '${userId}' is not a member of '${workspaceKey}'.`);

export const listMembers: RbacHandler<"members.list"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
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
};

/**
 * Whether a workspace session may add this user to its workspace: only a user it
 * already reaches through its tenant, a member of another workspace of the same tenant, who is no platform
 * operator (holds no global role) and holds no right the caller lacks. Platform sessions add any user.
 */
async function mayAddMember(
  deps: RbacDeps,
  principal: Principal,
  target: { readonly workspaceKey: string; readonly tenantKey: string },
  user: UserRow,
): Promise<boolean> {
  if (reachOf(principal).kind === "platform") return true;
  const userId = user.id;
  const theirs = await deps.db.any<{ workspace_key: string }>(
    sql`SELECT workspace_key FROM rbac.memberships WHERE user_id = ${userId} LIMIT 500`,
  );
  // Already a member: the caller reaches the user, and the PUT changes nothing.
  if (theirs.some((m) => m.workspace_key === target.workspaceKey)) return true;
  if (theirs.length === 0 || user.global_role !== null) return false;
  const found = await deps.tenancy({ workspaceKeys: theirs.map((m) => m.workspace_key), tenantKeys: [] });
  if (!found.workspaces.some((w) => w.tenantKey === target.tenantKey)) return false;
  return !(await holdsMoreRights(deps.db, principal, userId));
}

export const putMember: RbacHandler<"members.put"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  const target = (await deps.tenancy({ workspaceKeys: [workspaceKey], tenantKeys: [] })).workspaces[0];
  if (target === undefined) throw new NotFoundError(`Workspace '${workspaceKey}' was not found.`);
  // One answer for a user that does not exist and one the caller does not reach: nothing tells them apart.
  const user = await findUser(deps.db, userId);
  if (user === null || !(await mayAddMember(deps, req.principal, target, user))) {
    throw new NotFoundError(`User '${userId}' was not found.`);
  }
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
};

export const deleteMember: RbacHandler<"members.delete"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  const deleted = await deps.db.transaction(async (tx) => {
    const row = await tx.maybeOne(sql`
      DELETE FROM rbac.memberships WHERE workspace_key = ${workspaceKey} AND user_id = ${userId} RETURNING 1 AS gone`);
    if (row !== null) {
      await deps.outbox.record(tx, "workspace.member-removed", workspaceKey, { workspaceKey, userId });
    }
    return row;
  });
  if (deleted === null) throw notAMember(workspaceKey, userId);
  await revoke(deps, await sessionsOfUser(deps.db, userId, workspaceKey));
  return noContent();
};

export const getMemberRoles: RbacHandler<"member-roles.get"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  if (!(await isMember(deps.db, workspaceKey, userId))) throw notAMember(workspaceKey, userId);
  return ok({ userId, roles: await memberRoles(deps.db, workspaceKey, userId) });
};

/**
 * No one grants what they do not hold: a caller may give member roles only when it
 * holds, in that workspace, every key they would carry there after the sign-in filter; otherwise a 403
 * naming the first key it lacks. A superadmin, a `*` holder and a platform session holding `role.update`
 * (which may define any role anyway) are not limited.
 */
function requireHeldKeys(deps: RbacDeps, principal: Principal, workspaceKey: string, keys: string[]): void {
  if (principal.roles.includes(SystemRole.SuperAdmin) || principal.permissions.includes(WILDCARD)) return;
  if (reachOf(principal).kind === "platform" && principal.permissions.includes("role.update")) return;
  const held = new Set(principal.permissions);
  const missing = filterWorkspaceKeys(keys, deps.activePlugins(workspaceKey)).find((k) => !held.has(k));
  if (missing !== undefined) {
    throw new SvcError(
      ErrorCode.Forbidden,
      `These roles carry the permission '${missing}', which you do not hold in '${workspaceKey}': you may only give what you hold.`,
      { extensions: { missingPermission: missing, rule: "grant-only-held-keys" } },
    );
  }
}

export const putMemberRoles: RbacHandler<"member-roles.put"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  if (!(await isMember(deps.db, workspaceKey, userId))) throw notAMember(workspaceKey, userId);
  // superadmin is a platform role: as a member role it would pass every check inside the workspace.
  if (req.body.roles.includes(SystemRole.SuperAdmin)) {
    throw new ValidationError([
      { field: "/body/roles", message: "platform roles cannot be member roles ('superadmin')" },
    ]);
  }
  const roles = new Map((await listRoles(deps.db)).map((r) => [r.name, r]));
  const unknown = req.body.roles.filter((r) => !roles.has(r));
  if (unknown.length > 0) {
    throw new ValidationError(unknown.map((r) => ({ field: "/body/roles", message: `unknown role '${r}'` })));
  }
  requireHeldKeys(
    deps,
    req.principal,
    workspaceKey,
    req.body.roles.flatMap((r) => roles.get(r)?.permissions ?? []),
  );
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
};

/**
 * Workspaces were deleted (the resolver's broadcast): their memberships go, each recorded as
 * `workspace.member-removed`, and the sessions signed in to them are revoked.
 */
export async function forgetWorkspaces(
  deps: Pick<RbacDeps, "db" | "outbox" | "revoked" | "log">,
  workspaceKeys: readonly string[],
): Promise<void> {
  if (workspaceKeys.length === 0) return;
  const keys = [...workspaceKeys];
  await deps.db.transaction(async (tx) => {
    const gone = await tx.any<{ workspace_key: string; user_id: string }>(sql`
      DELETE FROM rbac.memberships WHERE workspace_key = ANY(${keys}::text[]) RETURNING workspace_key, user_id`);
    for (const m of gone) {
      await deps.outbox.record(tx, "workspace.member-removed", m.workspace_key, {
        workspaceKey: m.workspace_key,
        userId: m.user_id,
      });
    }
  });
  const sessions = await deps.db.any<{ id: string; expires_at: Date }>(sql`
    SELECT id, expires_at FROM rbac.sessions
    WHERE workspace_key = ANY(${keys}::text[]) AND revoked_at IS NULL AND expires_at > now()`);
  await revoke(deps, sessions);
}
