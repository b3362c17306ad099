/**
 * Roles through their contracts, without NATS or PostgreSQL: the platform-only rule is the contract's,
 * checked once before any handler runs (no handler repeats it), and the rules on system roles refuse a
 * change before the database is asked.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, rbacContract, rbacRoutes, type RouteContract } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import type { RoleRow, UserRow } from "./repository.js";
import {
  deleteAssignment,
  deleteRole,
  listAssignments,
  putAssignment,
  putRole,
  type RoleDeps,
  type RoleTables,
} from "./roles.js";

/** Dependencies none of these calls may touch: the rules answer first. */
const untouched = new Proxy({} as RoleDeps, {
  get(_target, name) {
    throw new Error(`the handler used deps.${String(name)} before its rules answered`);
  },
});

// Every key of the roles below: no one grants past their own rights.
const platform = caller([
  "role.read",
  "role.update",
  "user.create",
  "user.read",
  "workspace.read",
  "webhook.read",
]);
/** A workspace session holding every key of the routes below: the scope, not the key, refuses it. */
const workspaceAdmin: Principal = { ...platform, scope: "workspace", workspaceKey: "alpha" };

const neverCalled = () => {
  throw new Error("the handler ran");
};
const userId = "6f1c1b8e-0d9b-4f5e-9a57-5d3b1b0c2a11";

describe("platform-only routes", () => {
  const cases = [
    ["roles.list", {}, null],
    ["permissions.list", {}, null],
    ["roles.put", { role: "editor" }, { permissions: ["user.read"] }],
    ["roles.delete", { role: "editor" }, null],
    ["role-assignments.put", { userId }, { role: "editor" }],
    ["role-assignments.delete", { userId }, null],
    ["users.create", {}, { userName: "newbie", password: "a long enough password" }],
  ] as const;

  it.each(cases)(
    "%s refuses a workspace session holding its key, before the handler",
    async (name, params, body) => {
      const route: RouteContract = rbacRoutes[name];
      expect(route.platformOnly).toBe(true);
      const call = callRoute(route, neverCalled, { principal: workspaceAdmin, params, query: {}, body });
      await expect(call).rejects.toMatchObject({
        code: ErrorCode.Forbidden,
        extensions: { requiredScope: "platform" },
      });
    },
  );

  it("covers every platform-only route rbac serves", () => {
    const routes: Record<string, RouteContract> = rbacContract.routes;
    const platformOnly = Object.entries(routes)
      .filter(([, route]) => route.platformOnly === true)
      .map(([name]) => name);
    for (const [name] of cases) expect(platformOnly).toContain(name);
  });
});

describe("PUT /api/rbac/roles/:role on system roles", () => {
  const put = (role: string, body: { permissions: string[]; scope?: "platform" | "workspace" }) =>
    callRoute(rbacRoutes["roles.put"], (req) => putRole(untouched, req), {
      principal: platform,
      params: { role },
      query: {},
      body,
    });

  it("changes nothing of superadmin", async () => {
    await expect(put("superadmin", { permissions: ["*"] })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
  });

  it("keeps admin's grants fixed, naming the rule and the grants", async () => {
    await expect(put("admin", { permissions: ["user.read", "user.create"] })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
      extensions: { rule: "system-role-grants", role: "admin" },
    });
  });

  it("keeps a system role's scope", async () => {
    await expect(put("host.api", { permissions: ["user.read"], scope: "workspace" })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
      extensions: { rule: "system-role-scope", role: "host.api" },
    });
  });
});

/** The role tables and the users in memory, answering as the SQL does. */
class MemoryRoles implements RoleTables {
  readonly roles = new Map<string, RoleRow>();
  readonly users = new Map<string, UserRow>();
  /** Open sessions: id → the roles they carry and their user. */
  readonly sessions = new Map<string, { userId: string; roles: string[] }>();
  saves = 0;

  constructor() {
    for (const r of [
      { name: "superadmin", description: "", scope: "platform", permissions: ["*"], source: "system" },
      {
        name: "operator",
        description: "ops",
        scope: "platform",
        permissions: ["user.read"],
        source: "custom",
      },
      {
        name: "editor",
        description: "",
        scope: "workspace",
        permissions: ["workspace.read"],
        source: "custom",
      },
    ] as RoleRow[])
      this.roles.set(r.name, r);
  }

  async list() {
    return [...this.roles.values()];
  }
  async find(name: string) {
    return this.roles.get(name) ?? null;
  }
  async permissionKeys() {
    return ["user.read", "workspace.read", "webhook.read"].map((key) => ({
      key,
      source: "core",
      description: key,
    }));
  }
  async knownKeys() {
    return new Set(["*", ...(await this.permissionKeys()).map((k) => k.key)]);
  }
  async save(
    name: string,
    c: { permissions: readonly string[]; description: string | null; scope: RoleRow["scope"] | null },
  ) {
    this.saves++;
    const before = this.roles.get(name);
    const role: RoleRow = {
      name,
      description: c.description ?? before?.description ?? "",
      scope: before?.source === "system" ? before.scope : (c.scope ?? before?.scope ?? "platform"),
      permissions: [...c.permissions],
      source: before?.source ?? "api",
    };
    this.roles.set(name, role);
    return { role, existed: before !== undefined };
  }
  async remove(name: string) {
    this.roles.delete(name);
  }
  async sessionsHolding(name: string) {
    return [...this.sessions]
      .filter(([, s]) => s.roles.includes(name) || this.users.get(s.userId)?.global_role === name)
      .map(([id]) => ({ id, expires_at: new Date(0) }));
  }
  async assign(userId: string, role: string | null) {
    const user = this.users.get(userId);
    if (user !== undefined) user.global_role = role;
  }
}

describe("roles and global role assignments", () => {
  let tables: MemoryRoles;
  let revoked: string[];
  let announced: string[];
  let deps: RoleDeps;
  const alice = "0b5f3a4e-2c1d-4e6f-8a9b-0c1d2e3f4a5b";
  const bob = "1c6a4b5f-3d2e-4f7a-9b0c-1d2e3f4a5b6c";

  beforeEach(() => {
    tables = new MemoryRoles();
    revoked = [];
    announced = [];
    const user = (id: string, name: string, globalRole: string | null): UserRow => ({
      id,
      user_name: name,
      display_name: name,
      email: null,
      password_hash: null,
      is_active: true,
      global_role: globalRole,
      created_at: new Date(0),
      updated_at: new Date(0),
    });
    tables.users.set(alice, user(alice, "alice", "operator"));
    tables.users.set(bob, user(bob, "bob", null));
    tables.sessions.set("s-alice", { userId: alice, roles: ["operator"] });
    tables.sessions.set("s-bob", { userId: bob, roles: [] });
    deps = {
      roles: tables,
      users: {
        page: async () => ({
          items: [...tables.users.values()].sort((a, b) => a.user_name.localeCompare(b.user_name)),
          nextCursor: null,
        }),
        // A copy, as a row read is.
        reachable: async (_principal, id) => {
          const row = tables.users.get(id);
          return row === undefined ? null : { ...row };
        },
        openSessions: async (id) =>
          [...tables.sessions]
            .filter(([, s]) => s.userId === id)
            .map(([sid]) => ({ id: sid, expires_at: new Date(0) })),
        // Global roles only: these users are members of no workspace.
        rolesOf: async (id) => {
          const role = tables.roles.get(tables.users.get(id)?.global_role ?? "");
          return role === undefined ? [] : [{ name: role.name, permissions: role.permissions }];
        },
      },
      revokeSessions: async (sessions) => void revoked.push(...sessions.map((s) => s.id)),
      announceRoleChange: (role) => void announced.push(role),
    };
  });

  const as = (principal: Principal) => ({
    put: (role: string, permissions: string[]) =>
      callRoute(rbacRoutes["roles.put"], (req) => putRole(deps, req), {
        principal,
        params: { role },
        query: {},
        body: { permissions },
      }),
    remove: (role: string) =>
      callRoute(rbacRoutes["roles.delete"], (req) => deleteRole(deps, req), {
        principal,
        params: { role },
        query: {},
        body: null,
      }),
    assign: (id: string, role: string) =>
      callRoute(rbacRoutes["role-assignments.put"], (req) => putAssignment(deps, req), {
        principal,
        params: { userId: id },
        query: {},
        body: { role },
      }),
    unassign: (id: string) =>
      callRoute(rbacRoutes["role-assignments.delete"], (req) => deleteAssignment(deps, req), {
        principal,
        params: { userId: id },
        query: {},
        body: null,
      }),
  });

  it("grants no one past the caller's own rights: no role with a key it lacks, no superadmin, no demotion of a stronger user", async () => {
    // role.update alone: the keys of the operator role (user.read) are not its own.
    const manager = as({ ...platform, permissions: ["role.read", "role.update"], roles: ["role-manager"] });
    const beyond = { code: ErrorCode.Forbidden, extensions: { rule: "grant-exceeds-own-rights" } };
    await expect(manager.put("everything", ["*"])).rejects.toMatchObject(beyond);
    await expect(manager.put("reader", ["user.read"])).rejects.toMatchObject(beyond);
    // Nor empties a role it could not have written (its holders would lose user.read).
    await expect(manager.put("operator", [])).rejects.toMatchObject(beyond);
    await expect(manager.remove("operator")).rejects.toMatchObject(beyond);
    await expect(manager.assign(bob, "superadmin")).rejects.toMatchObject(beyond);
    await expect(manager.assign(bob, "operator")).rejects.toMatchObject(beyond);
    // Alice holds user.read through her global role: taking it away is not the manager's to do.
    await expect(manager.unassign(alice)).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
      extensions: { rule: "target-holds-more-rights" },
    });
    expect(tables.saves).toBe(0);
    expect([tables.users.get(alice)?.global_role, tables.users.get(bob)?.global_role]).toEqual([
      "operator",
      null,
    ]);
    expect(tables.roles.has("operator")).toBe(true);
    expect(revoked).toEqual([]);

    // Holding user.read as well, it may give and take the operator role, but never touch a superadmin.
    const reader = as({ ...platform, permissions: ["role.update", "user.read"], roles: ["role-manager"] });
    expect((await reader.put("reader", ["user.read"])).status).toBe(201);
    expect((await reader.assign(bob, "operator")).body).toMatchObject({ role: "operator" });
    const root = as({ ...platform, permissions: [], roles: ["superadmin"] });
    expect((await root.assign(bob, "superadmin")).body).toMatchObject({ role: "superadmin" });
    await expect(reader.unassign(bob)).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
      extensions: { rule: "target-holds-more-rights" },
    });
    await expect(reader.assign(bob, "operator")).rejects.toMatchObject({ code: ErrorCode.Forbidden });
    expect((await root.unassign(bob)).status).toBe(204);
  });

  const call = {
    put: (role: string, body: Record<string, unknown>) =>
      callRoute(rbacRoutes["roles.put"], (req) => putRole(deps, req), {
        principal: platform,
        params: { role },
        query: {},
        body,
      } as never),
    remove: (role: string) =>
      callRoute(rbacRoutes["roles.delete"], (req) => deleteRole(deps, req), {
        principal: platform,
        params: { role },
        query: {},
        body: null,
      }),
    assign: (id: string, role: string) =>
      callRoute(rbacRoutes["role-assignments.put"], (req) => putAssignment(deps, req), {
        principal: platform,
        params: { userId: id },
        query: {},
        body: { role },
      }),
    unassign: (id: string) =>
      callRoute(rbacRoutes["role-assignments.delete"], (req) => deleteAssignment(deps, req), {
        principal: platform,
        params: { userId: id },
        query: {},
        body: null,
      }),
    assignments: () =>
      callRoute(rbacRoutes["role-assignments.list"], (req) => listAssignments(deps, req), {
        principal: platform,
        params: {},
        query: {},
        body: null,
      }),
  };

  it("makes a new role with 201 and revokes nothing; a changed role ends the sessions holding it and tells the gateways", async () => {
    const made = await call.put("auditor", { permissions: ["user.read"], description: "reads" });
    expect(made).toMatchObject({ status: 201, body: { name: "auditor", scope: "platform", source: "api" } });
    expect(revoked).toEqual([]);
    expect(announced).toEqual(["auditor"]);
    const changed = await call.put("operator", { permissions: ["user.read", "webhook.read"] });
    expect(changed.status).toBe(200);
    // Left out, the description stays.
    expect(changed.body).toMatchObject({ description: "ops", permissions: ["user.read", "webhook.read"] });
    expect(revoked).toEqual(["s-alice"]);
    expect(announced).toEqual(["auditor", "operator"]);
  });

  it("refuses a grant of a key the catalogue does not have, naming each, and saves nothing", async () => {
    await expect(
      call.put("auditor", { permissions: ["user.read", "no.such", "nor.this"] }),
    ).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [
        { field: "/body/permissions", message: "unknown permission key 'no.such'" },
        { field: "/body/permissions", message: "unknown permission key 'nor.this'" },
      ],
    });
    expect(tables.saves).toBe(0);
    expect(announced).toEqual([]);
  });

  it("deletes a role of its own, ending the sessions holding it; never a system role; 404 for an unknown one", async () => {
    await expect(call.remove("superadmin")).rejects.toMatchObject({ code: ErrorCode.Conflict });
    await expect(call.remove("nobody")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(revoked).toEqual([]);
    expect((await call.remove("operator")).status).toBe(204);
    expect(tables.roles.has("operator")).toBe(false);
    expect(revoked).toEqual(["s-alice"]);
    expect(announced).toEqual(["operator"]);
  });

  it("assigns only a platform-scope role that exists, ending the user's sessions when the role changes", async () => {
    await expect(call.assign(bob, "editor")).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [expect.objectContaining({ field: "/body/role" })],
    });
    await expect(call.assign(bob, "nobody")).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    await expect(call.assign("2d7b5c6a-4e3f-4a8b-9c0d-2e3f4a5b6c7d", "operator")).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    expect(tables.users.get(bob)?.global_role).toBeNull();
    // The same role again: nothing to end.
    expect((await call.assign(alice, "operator")).body).toEqual({
      userId: alice,
      userName: "alice",
      role: "operator",
    });
    expect(revoked).toEqual([]);
    await call.assign(bob, "operator");
    expect(tables.users.get(bob)?.global_role).toBe("operator");
    expect(revoked).toEqual(["s-bob"]);
    expect((await call.assignments()).body?.items).toEqual([
      { userId: alice, userName: "alice", role: "operator" },
      { userId: bob, userName: "bob", role: "operator" },
    ]);
  });

  it("takes a global role away, ending the sessions only of a user that had one", async () => {
    expect((await call.unassign(bob)).status).toBe(204);
    expect(revoked).toEqual([]);
    await call.unassign(alice);
    expect(tables.users.get(alice)?.global_role).toBeNull();
    expect(revoked).toEqual(["s-alice"]);
  });
});
