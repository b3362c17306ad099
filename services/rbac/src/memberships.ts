/**
 * Memberships and member roles (workspace administration uses `membership.*`). The gateway limits
 * a workspace session to its own workspace, and every handler checks the same again with the caller's
 * principal. Changing a member's roles or removing a member revokes their sessions in that workspace.
 */
import { reachOf, SystemRole, WILDCARD } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { PlatformEventData, RouteHandlerWith } from "@svc/contracts";
import { type Db, isForeignKeyViolation, sql } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";
import type { Outbox } from "@svc/outbox";

import { noContent, ok, type RbacDeps, type RbacRoutes, revoke } from "./deps.js";
import {
  findUser,
  isMember,
  listRoles,
  memberRoleKeys,
  sessionsOfUser,
  type UserRow,
  userView,
} from "./repository.js";
import { listUserRows, moreRights, outranks, rolesOfUser } from "./users.js";

const notAMember = (workspaceKey: string, userId: string) =>
  new NotFoundError(`User '${userId}' is not a member of '${workspaceKey}'.`);

/**
 * What the membership routes ask of their tables (the rules stay in the handlers). A membership's
 * change records its event in the transaction of the change.
 */
export interface MemberTables {
  /** One page of a workspace's members that `principal` reaches, each with its member roles. */
  page(
    principal: Principal,
    workspaceKey: string,
    query: { limit?: number; cursor?: string },
  ): Promise<{ items: Array<UserRow & { roles: string[] }>; nextCursor: string | null }>;
  findUser(userId: string): Promise<UserRow | null>;
  /** The workspaces a user is a member of (up to 500). */
  workspacesOf(userId: string): Promise<string[]>;
  /** The roles a user holds, global and member, with their keys. */
  rolesHeldBy(userId: string): Promise<Array<{ name: string; permissions: string[] }>>;
  /** The roles a user holds in one workspace, its global role and its member roles there, with their keys. */
  rolesHeldIn(workspaceKey: string, userId: string): Promise<Array<{ name: string; permissions: string[] }>>;
  /** Adds the membership and records `workspace.member-assigned`; false when it existed. */
  add(workspaceKey: string, user: UserRow): Promise<boolean>;
  /** Removes the membership and records `workspace.member-removed`; false when there was none. */
  remove(workspaceKey: string, userId: string): Promise<boolean>;
  isMember(workspaceKey: string, userId: string): Promise<boolean>;
  memberRoles(workspaceKey: string, userId: string): Promise<string[]>;
  /** Every role, with its keys. */
  roles(): Promise<Array<{ name: string; permissions: string[] }>>;
  /** Replaces a member's roles; a membership or role gone meanwhile is a NotFoundError. */
  setMemberRoles(workspaceKey: string, userId: string, roles: readonly string[]): Promise<void>;
  /** The user's sessions in the workspace that are still good (to revoke). */
  openSessions(userId: string, workspaceKey: string): Promise<Array<{ id: string; expires_at: Date }>>;
}

/** The membership tables in PostgreSQL, their events in rbac's outbox. */
export function memberTables(db: Db, outbox: Outbox<PlatformEventData>): MemberTables {
  const memberRoles = async (workspaceKey: string, userId: string) =>
    (await memberRoleKeys(db, workspaceKey, userId)).map((r) => r.role);
  return {
    page: async (principal, workspaceKey, query) => {
      const { items, nextCursor } = await listUserRows(
        db,
        principal,
        query,
        sql`u.id IN (SELECT user_id FROM rbac.memberships WHERE workspace_key = ${workspaceKey})`,
      );
      const withRoles = await Promise.all(
        items.map(async (u) => ({ ...u, roles: await memberRoles(workspaceKey, u.id) })),
      );
      return { items: withRoles, nextCursor };
    },
    findUser: (userId) => findUser(db, userId),
    workspacesOf: async (userId) =>
      (
        await db.any<{ workspace_key: string }>(
          sql`SELECT workspace_key FROM rbac.memberships WHERE user_id = ${userId} LIMIT 500`,
        )
      ).map((m) => m.workspace_key),
    rolesHeldBy: (userId) => rolesOfUser(db, userId),
    rolesHeldIn: (workspaceKey, userId) => rolesOfUser(db, userId, workspaceKey),
    add: (workspaceKey, user) =>
      db
        .transaction(async (tx) => {
          const row = await tx.maybeOne(sql`
            INSERT INTO rbac.memberships (workspace_key, user_id) VALUES (${workspaceKey}, ${user.id})
            ON CONFLICT DO NOTHING RETURNING 1 AS created`);
          if (row !== null) {
            await outbox.record(tx, "workspace.member-assigned", workspaceKey, {
              workspaceKey,
              userId: user.id,
              userName: user.user_name,
            });
          }
          return row !== null;
        })
        .catch((error: unknown) => {
          // The user was deleted by a concurrent request since it was read.
          if (isForeignKeyViolation(error)) throw new NotFoundError(`User '${user.id}' was not found.`);
          throw error;
        }),
    remove: (workspaceKey, userId) =>
      db.transaction(async (tx) => {
        const row = await tx.maybeOne(sql`
          DELETE FROM rbac.memberships WHERE workspace_key = ${workspaceKey} AND user_id = ${userId}
          RETURNING 1 AS gone`);
        if (row !== null) {
          await outbox.record(tx, "workspace.member-removed", workspaceKey, { workspaceKey, userId });
        }
        return row !== null;
      }),
    isMember: (workspaceKey, userId) => isMember(db, workspaceKey, userId),
    memberRoles,
    roles: () => listRoles(db),
    setMemberRoles: (workspaceKey, userId, roles) =>
      db
        .transaction(async (tx) => {
          await tx.query(
            sql`DELETE FROM rbac.membership_roles WHERE workspace_key = ${workspaceKey} AND user_id = ${userId}`,
          );
          await tx.query(sql`
            INSERT INTO rbac.membership_roles (workspace_key, user_id, role)
            SELECT ${workspaceKey}, ${userId}, r FROM unnest(${[...roles]}::text[]) AS r`);
        })
        .catch((error: unknown) => {
          // The membership or a role was deleted by a concurrent request since they were read.
          if (isForeignKeyViolation(error))
            throw new NotFoundError(
              `User '${userId}' is not a member of '${workspaceKey}', or a role is gone.`,
            );
          throw error;
        }),
    openSessions: (userId, workspaceKey) => sessionsOfUser(db, userId, workspaceKey),
  };
}

/** What the membership handlers are given. */
export interface MemberDeps {
  readonly members: MemberTables;
  readonly revokeSessions: (sessions: ReadonlyArray<{ id: string; expires_at: Date }>) => Promise<void>;
  /** The plugins active and assigned in a workspace (their keys survive in its sessions). */
  readonly activePlugins: RbacDeps["activePlugins"];
  /** Which workspaces exist, and their tenant: the resolver's. */
  readonly tenancy: RbacDeps["tenancy"];
}
type MemberHandler<K extends keyof RbacRoutes> = RouteHandlerWith<MemberDeps, RbacRoutes[K]>;

export const listMembers: MemberHandler<"members.list"> = async (deps, req) => {
  const { items, nextCursor } = await deps.members.page(req.principal, req.params.workspaceKey, req.query);
  return ok({ items: items.map((u) => ({ ...userView(u), roles: u.roles })), nextCursor });
};

/**
 * Whether a workspace session may add this user to its workspace: only a user it
 * already reaches through its tenant, a member of another workspace of the same tenant, who is no platform
 * operator (holds no global role) and holds no right the caller lacks. Platform sessions add any user.
 */
async function mayAddMember(
  deps: MemberDeps,
  principal: Principal,
  target: { readonly workspaceKey: string; readonly tenantKey: string },
  user: UserRow,
): Promise<boolean> {
  if (reachOf(principal).kind === "platform") return true;
  const theirs = await deps.members.workspacesOf(user.id);
  // Already a member: the caller reaches the user, and the PUT changes nothing.
  if (theirs.includes(target.workspaceKey)) return true;
  if (theirs.length === 0 || user.global_role !== null) return false;
  const found = await deps.tenancy({ workspaceKeys: theirs, tenantKeys: [] });
  if (!found.workspaces.some((w) => w.tenantKey === target.tenantKey)) return false;
  return !outranks(principal, await deps.members.rolesHeldBy(user.id));
}

export const putMember: MemberHandler<"members.put"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  const target = (await deps.tenancy({ workspaceKeys: [workspaceKey], tenantKeys: [] })).workspaces[0];
  if (target === undefined) throw new NotFoundError(`Workspace '${workspaceKey}' was not found.`);
  // One answer for a user that does not exist and one the caller does not reach: nothing tells them apart.
  const user = await deps.members.findUser(userId);
  if (user === null || !(await mayAddMember(deps, req.principal, target, user))) {
    throw new NotFoundError(`User '${userId}' was not found.`);
  }
  const inserted = await deps.members.add(workspaceKey, user);
  return ok(
    { workspaceKey, userId, roles: await deps.members.memberRoles(workspaceKey, userId) },
    inserted ? 201 : 200,
  );
};

export const deleteMember: MemberHandler<"members.delete"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  if (!(await deps.members.isMember(workspaceKey, userId))) throw notAMember(workspaceKey, userId);
  await requireNotStronger(deps, req.principal, workspaceKey, userId);
  if (!(await deps.members.remove(workspaceKey, userId))) throw notAMember(workspaceKey, userId);
  await deps.revokeSessions(await deps.members.openSessions(userId, workspaceKey));
  return noContent();
};

export const getMemberRoles: MemberHandler<"member-roles.get"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  if (!(await deps.members.isMember(workspaceKey, userId))) throw notAMember(workspaceKey, userId);
  return ok({ userId, roles: await deps.members.memberRoles(workspaceKey, userId) });
};

/**
 * No one grants what they do not hold: a caller may give member roles only when it holds every key they
 * carry, including keys that do not count in that workspace today (a plugin's before it joins the chain,
 * which would count at a later sign-in; a platform key, which would make the member look stronger than
 * those who could change it); otherwise a 403 naming the first key it lacks. A superadmin and a `*` holder
 * are not limited.
 */
function requireHeldKeys(principal: Principal, workspaceKey: string, keys: readonly string[]): void {
  if (principal.roles.includes(SystemRole.SuperAdmin) || principal.permissions.includes(WILDCARD)) return;
  const held = new Set(principal.permissions);
  const missing = keys.find((k) => !held.has(k));
  if (missing !== undefined) {
    throw new SvcError(
      ErrorCode.Forbidden,
      `These roles carry the permission '${missing}', which you do not hold in '${workspaceKey}': you may only give what you hold.`,
      { extensions: { missingPermission: missing, rule: "grant-only-held-keys" } },
    );
  }
}

/**
 * Refuses (403) to change the membership of a user who holds, in that workspace or platform-wide, a right
 * the caller does not: a workspace admin does not strip a stronger co-admin, nor a platform operator.
 */
async function requireNotStronger(
  deps: MemberDeps,
  principal: Principal,
  workspaceKey: string,
  userId: string,
): Promise<void> {
  if (outranks(principal, await deps.members.rolesHeldIn(workspaceKey, userId))) throw moreRights();
}

export const putMemberRoles: MemberHandler<"member-roles.put"> = async (deps, req) => {
  const { workspaceKey, userId } = req.params;
  if (!(await deps.members.isMember(workspaceKey, userId))) throw notAMember(workspaceKey, userId);
  // superadmin is a platform role: as a member role it would pass every check inside the workspace.
  if (req.body.roles.includes(SystemRole.SuperAdmin)) {
    throw new ValidationError([
      { field: "/body/roles", message: "platform roles cannot be member roles ('superadmin')" },
    ]);
  }
  const roles = new Map((await deps.members.roles()).map((r) => [r.name, r]));
  const unknown = req.body.roles.filter((r) => !roles.has(r));
  if (unknown.length > 0) {
    throw new ValidationError(unknown.map((r) => ({ field: "/body/roles", message: `unknown role '${r}'` })));
  }
  requireHeldKeys(
    req.principal,
    workspaceKey,
    req.body.roles.flatMap((r) => roles.get(r)?.permissions ?? []),
  );
  // Nor changes the roles of a member stronger than the caller.
  await requireNotStronger(deps, req.principal, workspaceKey, userId);
  await deps.members.setMemberRoles(workspaceKey, userId, req.body.roles);
  // The member's sessions in this workspace carry the old keys: end them (the new set applies at sign-in).
  await deps.revokeSessions(await deps.members.openSessions(userId, workspaceKey));
  return ok({ userId, roles: [...req.body.roles].sort() });
};

/**
 * Workspaces were deleted (the resolver's `workspace.deleted`): their memberships go, each recorded as
 * `workspace.member-removed`, their integrations (API clients) go, and the sessions signed in to them are
 * revoked. A workspace made again under the same key inherits none of them.
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
    await tx.query(sql`DELETE FROM rbac.integrations WHERE workspace_key = ANY(${keys}::text[])`);
  });
  const sessions = await deps.db.any<{ id: string; expires_at: Date }>(sql`
    SELECT id, expires_at FROM rbac.sessions
    WHERE workspace_key = ANY(${keys}::text[]) AND revoked_at IS NULL AND expires_at > now()`);
  await revoke(deps, sessions);
}
