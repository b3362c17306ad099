/**
 * The user routes through their contracts, with their tables in memory (no NATS, no PostgreSQL): who a
 * caller reaches, the rule that no one changes a user holding rights the caller lacks, which changes end
 * the user's sessions, and what each change records as its event. `test/identity.test.ts` and the
 * conformance walk run the same routes against the real tables.
 */
import type { Principal } from "@svc/bus";
import { caller } from "@svc/contracts";
import { ConflictError, ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import { passwords, verifyPassword } from "./passwords.js";
import type { UserRow } from "./repository.js";
import { routeCaller } from "./route-caller.js";
import * as users from "./users.js";

/** Users and memberships in memory, with the events a change records. */
class MemoryUsers implements users.UserTables {
  readonly rows: UserRow[] = [];
  /** workspace → member ids */
  readonly members = new Map<string, Set<string>>();
  /** user id → roles (global and member) */
  readonly roles = new Map<string, Array<{ name: string; permissions: string[] }>>();
  readonly sessions = new Map<string, Array<{ id: string; expires_at: Date }>>();
  readonly events: Array<{ name: string; data: unknown }> = [];
  private clock = Date.parse("2026-11-27T10:00:00.000Z");

  private reaches(principal: Principal, userId: string): boolean {
    return (
      principal.scope === "platform" ||
      (principal.workspaceKey !== null && (this.members.get(principal.workspaceKey)?.has(userId) ?? false))
    );
  }

  async page(principal: Principal) {
    const items = this.rows
      .filter((u) => this.reaches(principal, u.id))
      .sort((a, b) => a.user_name.toLowerCase().localeCompare(b.user_name.toLowerCase()));
    return { items, nextCursor: null };
  }

  async reachable(principal: Principal, userId: string) {
    return this.rows.find((u) => u.id === userId && this.reaches(principal, u.id)) ?? null;
  }

  async create(u: users.NewUser) {
    if (this.rows.some((r) => r.user_name.toLowerCase() === u.userName.toLowerCase()))
      throw new ConflictError(`The user name '${u.userName}' is taken.`);
    const row: UserRow = {
      id: crypto.randomUUID(),
      user_name: u.userName,
      display_name: u.displayName,
      email: u.email,
      password_hash: u.passwordHash,
      is_active: true,
      global_role: null,
      created_at: new Date((this.clock += 1_000)),
      updated_at: new Date(this.clock),
    };
    this.rows.push(row);
    this.events.push({ name: "user.created", data: { userId: row.id, userName: row.user_name } });
    return row;
  }

  async update(userId: string, c: users.UserChange) {
    const row = this.rows.find((u) => u.id === userId);
    if (row === undefined) return null;
    if (c.displayName !== undefined) row.display_name = c.displayName;
    if (c.email !== undefined) row.email = c.email;
    if (c.passwordHash !== null) row.password_hash = c.passwordHash;
    this.events.push({ name: "user.updated", data: { userId } });
    return row;
  }

  async setActive(userId: string, isActive: boolean) {
    const row = this.rows.find((u) => u.id === userId);
    if (row === undefined) return null;
    row.is_active = isActive;
    this.events.push({ name: "user.updated", data: { userId, isActive } });
    return row;
  }

  async remove(user: UserRow) {
    this.rows.splice(this.rows.indexOf(user), 1);
    this.events.push({ name: "user.deleted", data: { userId: user.id, userName: user.user_name } });
  }

  async rolesOf(userId: string) {
    return this.roles.get(userId) ?? [];
  }

  async openSessions(userId: string) {
    return this.sessions.get(userId) ?? [];
  }

  /** user id → what its export holds besides the user. */
  readonly exports = new Map<string, users.UserExport>();

  async exportOf(userId: string) {
    return this.exports.get(userId) ?? { memberships: [], sessions: [] };
  }
}

function stack() {
  const tables = new MemoryUsers();
  const revoked: string[] = [];
  const deps: users.UserDeps = {
    users: tables,
    revokeSessions: async (sessions) => void revoked.push(...sessions.map((s) => s.id)),
    passwords: passwords(10),
  };
  const call = routeCaller(deps);
  return { tables, revoked, call };
}

const operator = caller(["user.create", "user.read", "user.update", "user.delete"]);
const superadmin: Principal = { ...operator, subject: "root", roles: ["superadmin"], permissions: ["*"] };
const alphaAdmin: Principal = {
  subject: "alpha-admin",
  scope: "workspace",
  workspaceKey: "alpha",
  permissions: ["user.read"],
  roles: ["admin"],
};
const newUser = (userName: string) => ({ userName, password: "a long enough password" });

describe("the user routes", () => {
  it("creates a user with a hashed password and user.created, and refuses a taken name with a 409", async () => {
    const { tables, call } = stack();
    const made = await call("users.create", users.createUser, operator, { body: newUser("ada") });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ userName: "ada", isActive: true });
    expect(JSON.stringify(made.body)).not.toContain("a long enough password");
    // Stored as an scrypt hash the sign-in verifies, never as given.
    const stored = tables.rows[0]?.password_hash as string;
    // At the configured cost: N = 2^10.
    expect(stored).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(await verifyPassword("a long enough password", stored)).toBe(true);
    expect(tables.events.map((e) => e.name)).toEqual(["user.created"]);
    await expect(
      call("users.create", users.createUser, operator, { body: newUser("ADA") }),
    ).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
  });

  it("exports a user with memberships and sessions, never the password hash, to a platform session only", async () => {
    const { tables, call } = stack();
    const made = (await call("users.create", users.createUser, operator, { body: newUser("member") })).body;
    const id = made?.id as string;
    tables.members.set("alpha", new Set([id]));
    tables.exports.set(id, {
      memberships: [
        { workspaceKey: "alpha", createdAt: new Date("2026-11-01T00:00:00Z"), roles: ["editor"] },
      ],
      sessions: [
        {
          id: "7d0c2b1a-3e4f-4a5b-8c6d-7e8f9a0b1c2d",
          workspaceKey: "alpha",
          roles: ["editor"],
          createdAt: new Date("2026-11-02T00:00:00Z"),
          expiresAt: new Date("2026-11-02T01:00:00Z"),
          revokedAt: null,
        },
      ],
    });
    const exported = await call("users.export", users.exportUser, operator, { params: { userId: id } });
    expect(exported.body).toMatchObject({
      user: { id, userName: "member" },
      memberships: [{ workspaceKey: "alpha", roles: ["editor"], createdAtUtc: "2026-11-01T00:00:00.000Z" }],
      sessions: [{ workspaceKey: "alpha", expiresAtUtc: "2026-11-02T01:00:00.000Z", revokedAtUtc: null }],
    });
    expect(JSON.stringify(exported.body)).not.toContain("scrypt");
    expect(JSON.stringify(exported.body)).not.toMatch(/password/i);
    // A workspace session, even of the user's workspace: refused by the contract; an unknown user: 404.
    await expect(
      call("users.export", users.exportUser, alphaAdmin, { params: { userId: id } }),
    ).rejects.toMatchObject({ code: ErrorCode.Forbidden });
    await expect(
      call("users.export", users.exportUser, operator, { params: { userId: crypto.randomUUID() } }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });

  it("lets a workspace session read its members only: anyone else is a 404", async () => {
    const { tables, call } = stack();
    const member = (await call("users.create", users.createUser, operator, { body: newUser("member") })).body;
    const stranger = (await call("users.create", users.createUser, operator, { body: newUser("stranger") }))
      .body;
    tables.members.set("alpha", new Set([member?.id as string]));
    const listed = await call("users.list", users.listUsers, alphaAdmin, {});
    expect((listed.body?.items as Array<{ userName: string }>).map((u) => u.userName)).toEqual(["member"]);
    expect(
      (await call("users.get", users.getUser, alphaAdmin, { params: { userId: member?.id } })).status,
    ).toBe(200);
    await expect(
      call("users.get", users.getUser, alphaAdmin, { params: { userId: stranger?.id } }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });

  it("ends a user's sessions when its password changes or it is turned off, not on other changes", async () => {
    const { tables, revoked, call } = stack();
    const id = (await call("users.create", users.createUser, operator, { body: newUser("grace") })).body
      ?.id as string;
    tables.sessions.set(id, [{ id: "s1", expires_at: new Date(Date.now() + 60_000) }]);
    await call("users.update", users.updateUser, operator, {
      params: { userId: id },
      body: { displayName: "G" },
    });
    expect(revoked).toEqual([]);
    await call("users.update", users.updateUser, operator, {
      params: { userId: id },
      body: { password: "another long password" },
    });
    expect(revoked).toEqual(["s1"]);
    const off = await call("users.activation", users.setUserActivation, operator, {
      params: { userId: id },
      query: { isActive: false },
    });
    expect(off.body).toMatchObject({ isActive: false });
    expect(revoked).toEqual(["s1", "s1"]);
    expect(tables.events.at(-1)).toEqual({ name: "user.updated", data: { userId: id, isActive: false } });
  });

  it("refuses, with a 403 naming the rule, to change or delete a user who holds a right the caller lacks; a superadmin may", async () => {
    const { tables, revoked, call } = stack();
    const id = (await call("users.create", users.createUser, operator, { body: newUser("boss") })).body
      ?.id as string;
    tables.roles.set(id, [{ name: "billing", permissions: ["billing.invoice.delete"] }]);
    tables.sessions.set(id, [{ id: "s-boss", expires_at: new Date(Date.now() + 60_000) }]);
    for (const attempt of [
      () =>
        call("users.update", users.updateUser, operator, {
          params: { userId: id },
          body: { displayName: "x" },
        }),
      () =>
        call("users.activation", users.setUserActivation, operator, {
          params: { userId: id },
          query: { isActive: false },
        }),
      () => call("users.delete", users.deleteUser, operator, { params: { userId: id } }),
    ]) {
      await expect(attempt()).rejects.toMatchObject({
        code: ErrorCode.Forbidden,
        extensions: { rule: "target-holds-more-rights" },
      });
    }
    // Nothing changed, nothing ended.
    expect(tables.rows[0]).toMatchObject({ display_name: "", is_active: true });
    expect(revoked).toEqual([]);
    expect(tables.events.map((e) => e.name)).toEqual(["user.created"]);
    // A superadmin outranks everyone: the user's sessions end first, then it is deleted.
    expect(
      (await call("users.delete", users.deleteUser, superadmin, { params: { userId: id } })).status,
    ).toBe(204);
    expect(revoked).toEqual(["s-boss"]);
    expect(tables.rows).toEqual([]);
    expect(tables.events.at(-1)).toEqual({ name: "user.deleted", data: { userId: id, userName: "boss" } });
  });

  it("judges rights by every role the user holds: a superadmin role or a * grant outranks anyone but a superadmin", () => {
    expect(users.outranks(operator, [{ name: "viewer", permissions: ["user.read"] }])).toBe(false);
    expect(users.outranks(operator, [{ name: "superadmin", permissions: [] }])).toBe(true);
    expect(users.outranks(operator, [{ name: "custom", permissions: ["*"] }])).toBe(true);
    expect(users.outranks(superadmin, [{ name: "superadmin", permissions: ["*"] }])).toBe(false);
  });
});
