/**
 * The membership routes through their contracts, with their tables in memory (no NATS, no PostgreSQL):
 * whom a workspace session may add (a user of its own tenant only, never a platform operator or a stronger
 * user, and one answer for all the rest), that a member's removal and a change of its roles end its
 * sessions in that workspace, and that no one gives roles carrying keys they do not hold.
 */
import type { Principal } from "@svc/bus";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import * as members from "./memberships.js";
import type { UserRow } from "./repository.js";
import { routeCaller } from "./route-caller.js";

const user = (id: string, userName: string, globalRole: string | null = null): UserRow => ({
  id,
  user_name: userName,
  display_name: "",
  email: null,
  password_hash: null,
  is_active: true,
  global_role: globalRole,
  created_at: new Date(0),
  updated_at: new Date(0),
});

/** workspace → tenant */
const TENANTS: Record<string, string> = { "acme-shop": "acme", "acme-blog": "acme", "other-ws": "other" };
const ROLES = [
  { name: "editor", permissions: ["surface.update"] },
  { name: "admin", permissions: ["surface.update", "membership.update", "user.read"] },
  // A plugin's key: it counts in a workspace only once the plugin is in its chain (none is, here).
  { name: "crm-editor", permissions: ["surface.update", "crm.contacts.update"] },
  { name: "hooks", permissions: ["webhook.manage"] },
  { name: "operator", permissions: ["user.read", "tenant.read"] },
];

class MemoryMembers implements members.MemberTables {
  readonly users = new Map<string, UserRow>();
  /** `${workspace} ${user}` → roles */
  readonly memberships = new Map<string, string[]>();
  readonly held = new Map<string, Array<{ name: string; permissions: string[] }>>();
  readonly events: string[] = [];

  async page(_principal: Principal, workspaceKey: string) {
    const items = [...this.memberships]
      .filter(([k]) => k.startsWith(`${workspaceKey} `))
      .flatMap(([k, roles]) => {
        const u = this.users.get(k.split(" ")[1] as string);
        return u === undefined ? [] : [{ ...u, roles }];
      })
      .sort((a, b) => a.user_name.localeCompare(b.user_name));
    return { items, nextCursor: null };
  }
  async findUser(userId: string) {
    return this.users.get(userId) ?? null;
  }
  async workspacesOf(userId: string) {
    return [...this.memberships.keys()]
      .filter((k) => k.endsWith(` ${userId}`))
      .map((k) => k.split(" ")[0] as string);
  }
  async rolesHeldBy(userId: string) {
    return this.held.get(userId) ?? [];
  }
  async rolesHeldIn(workspaceKey: string, userId: string) {
    const global = this.users.get(userId)?.global_role;
    const names = [...(global ? [global] : []), ...(this.memberships.get(`${workspaceKey} ${userId}`) ?? [])];
    // superadmin is a system role, not among ROLES: as the table holds it, by its name.
    return names.map((name) => ROLES.find((r) => r.name === name) ?? { name, permissions: [] });
  }
  async add(workspaceKey: string, u: UserRow) {
    const key = `${workspaceKey} ${u.id}`;
    if (this.memberships.has(key)) return false;
    this.memberships.set(key, []);
    this.events.push(`workspace.member-assigned ${key}`);
    return true;
  }
  async remove(workspaceKey: string, userId: string) {
    const gone = this.memberships.delete(`${workspaceKey} ${userId}`);
    if (gone) this.events.push(`workspace.member-removed ${workspaceKey} ${userId}`);
    return gone;
  }
  async isMember(workspaceKey: string, userId: string) {
    return this.memberships.has(`${workspaceKey} ${userId}`);
  }
  async memberRoles(workspaceKey: string, userId: string) {
    return this.memberships.get(`${workspaceKey} ${userId}`) ?? [];
  }
  async roles() {
    return ROLES;
  }
  async setMemberRoles(workspaceKey: string, userId: string, roles: readonly string[]) {
    this.memberships.set(`${workspaceKey} ${userId}`, [...roles]);
  }
  async openSessions(userId: string, workspaceKey: string) {
    return [{ id: `${userId}@${workspaceKey}`, expires_at: new Date(Date.now() + 60_000) }];
  }
}

function stack() {
  const tables = new MemoryMembers();
  const revoked: string[] = [];
  const deps: members.MemberDeps = {
    members: tables,
    revokeSessions: async (sessions) => void revoked.push(...sessions.map((s) => s.id)),
    activePlugins: () => new Set<string>(),
    tenancy: async ({ workspaceKeys }) => ({
      workspaces: workspaceKeys
        .filter((k) => k in TENANTS)
        .map((workspaceKey) => ({
          workspaceKey,
          tenantKey: TENANTS[workspaceKey] as string,
          isActive: true,
          tenantIsActive: true,
        })),
      tenants: [],
    }),
  };
  const call = routeCaller(deps);
  return { tables, revoked, call };
}

const shopAdmin: Principal = {
  subject: "shop-admin",
  scope: "workspace",
  workspaceKey: "acme-shop",
  permissions: ["membership.update", "membership.delete", "membership.read", "surface.update", "user.read"],
  roles: ["admin"],
};
const ids = {
  blogger: "11111111-1111-4111-8111-111111111111",
  stranger: "22222222-2222-4222-8222-222222222222",
  operator: "33333333-3333-4333-8333-333333333333",
  boss: "44444444-4444-4444-8444-444444444444",
  lonely: "55555555-5555-4555-8555-555555555555",
};

describe("the membership routes", () => {
  it("lets a workspace session add only a user of its own tenant who is no operator and no stronger than it", async () => {
    const { tables, call } = stack();
    tables.users.set(ids.blogger, user(ids.blogger, "blogger"));
    tables.users.set(ids.stranger, user(ids.stranger, "stranger"));
    tables.users.set(ids.operator, user(ids.operator, "operator", "operator"));
    tables.users.set(ids.boss, user(ids.boss, "boss"));
    tables.users.set(ids.lonely, user(ids.lonely, "lonely"));
    tables.memberships.set(`acme-blog ${ids.blogger}`, []);
    tables.memberships.set(`other-ws ${ids.stranger}`, []);
    tables.memberships.set(`acme-blog ${ids.operator}`, []);
    tables.memberships.set(`acme-blog ${ids.boss}`, []);
    tables.held.set(ids.boss, [{ name: "billing", permissions: ["billing.invoice.delete"] }]);
    const put = (userId: string) =>
      call("members.put", members.putMember, shopAdmin, { params: { workspaceKey: "acme-shop", userId } });
    const made = await put(ids.blogger);
    expect(made.status).toBe(201);
    expect(tables.events).toEqual([`workspace.member-assigned acme-shop ${ids.blogger}`]);
    // Again: already a member, nothing changes.
    expect((await put(ids.blogger)).status).toBe(200);
    // Another tenant's user, a platform operator, a stronger user, a user of no workspace and one that
    // does not exist: the same 404 for all, and nothing written.
    for (const userId of [
      ids.stranger,
      ids.operator,
      ids.boss,
      ids.lonely,
      "66666666-6666-4666-8666-666666666666",
    ]) {
      await expect(put(userId), userId).rejects.toMatchObject({ code: ErrorCode.NotFound });
    }
    expect(tables.events).toHaveLength(1);
  });

  it("lists a workspace's members with their roles, and shows one member's roles; another workspace's is refused", async () => {
    const { tables, call } = stack();
    tables.users.set(ids.blogger, user(ids.blogger, "blogger"));
    tables.users.set(ids.stranger, user(ids.stranger, "stranger"));
    tables.memberships.set(`acme-shop ${ids.blogger}`, ["editor"]);
    tables.memberships.set(`acme-blog ${ids.stranger}`, ["admin"]);
    const listed = await call("members.list", members.listMembers, shopAdmin, {
      params: { workspaceKey: "acme-shop" },
    });
    expect(listed.body).toMatchObject({
      items: [{ id: ids.blogger, userName: "blogger", roles: ["editor"] }],
    });
    expect(JSON.stringify(listed.body)).not.toContain("scrypt");
    const roles = await call("member-roles.get", members.getMemberRoles, shopAdmin, {
      params: { workspaceKey: "acme-shop", userId: ids.blogger },
    });
    expect(roles.body).toEqual({ userId: ids.blogger, roles: ["editor"] });
    await expect(
      call("member-roles.get", members.getMemberRoles, shopAdmin, {
        params: { workspaceKey: "acme-shop", userId: ids.stranger },
      }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
    for (const [name, handler, params] of [
      ["members.list", members.listMembers, { workspaceKey: "acme-blog" }],
      ["member-roles.get", members.getMemberRoles, { workspaceKey: "acme-blog", userId: ids.stranger }],
    ] as const) {
      // Another workspace of the same tenant is as if it did not exist.
      await expect(call(name, handler, shopAdmin, { params })).rejects.toMatchObject({
        code: ErrorCode.NotFound,
      });
    }
  });

  it("ends the member's sessions in that workspace when it is removed or its roles change", async () => {
    const { tables, revoked, call } = stack();
    tables.memberships.set(`acme-shop ${ids.blogger}`, []);
    const params = { workspaceKey: "acme-shop", userId: ids.blogger };
    const changed = await call("member-roles.put", members.putMemberRoles, shopAdmin, {
      params,
      body: { roles: ["editor"] },
    });
    expect(changed.body).toEqual({ userId: ids.blogger, roles: ["editor"] });
    expect(revoked).toEqual([`${ids.blogger}@acme-shop`]);
    expect((await call("members.delete", members.deleteMember, shopAdmin, { params })).status).toBe(204);
    expect(revoked).toHaveLength(2);
    expect(tables.events).toEqual([`workspace.member-removed acme-shop ${ids.blogger}`]);
    await expect(call("members.delete", members.deleteMember, shopAdmin, { params })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
  });

  it("gives no role carrying a key the caller lacks, no platform role and no unknown role; nothing changes", async () => {
    const { tables, revoked, call } = stack();
    tables.memberships.set(`acme-shop ${ids.blogger}`, ["editor"]);
    const params = { workspaceKey: "acme-shop", userId: ids.blogger };
    const weak: Principal = { ...shopAdmin, permissions: ["membership.update", "surface.update"] };
    await expect(
      call("member-roles.put", members.putMemberRoles, weak, { params, body: { roles: ["admin"] } }),
    ).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
      extensions: { rule: "grant-only-held-keys", missingPermission: "user.read" },
    });
    for (const roles of [["superadmin"], ["no-such-role"]]) {
      await expect(
        call("member-roles.put", members.putMemberRoles, shopAdmin, { params, body: { roles } }),
      ).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    }
    expect(tables.memberships.get(`acme-shop ${ids.blogger}`)).toEqual(["editor"]);
    expect(revoked).toEqual([]);
  });

  it("gives no key the caller lacks even where it does not count yet, whoever asks; a platform session with role.update included", async () => {
    const { tables, call } = stack();
    tables.memberships.set(`acme-shop ${ids.blogger}`, []);
    const params = { workspaceKey: "acme-shop", userId: ids.blogger };
    // A plugin key that counts only once the plugin joins the chain: still not the admin's to give.
    await expect(
      call("member-roles.put", members.putMemberRoles, shopAdmin, {
        params,
        body: { roles: ["crm-editor"] },
      }),
    ).rejects.toMatchObject({
      extensions: { rule: "grant-only-held-keys", missingPermission: "crm.contacts.update" },
    });
    // role.update does not stand in for the keys: a platform session holding it gives only what it holds.
    const roleManager: Principal = {
      subject: "role-manager",
      scope: "platform",
      workspaceKey: null,
      permissions: ["role.update", "membership.update"],
      roles: ["role-manager"],
    };
    await expect(
      call("member-roles.put", members.putMemberRoles, roleManager, { params, body: { roles: ["hooks"] } }),
    ).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
      extensions: { missingPermission: "webhook.manage" },
    });
    expect(tables.memberships.get(`acme-shop ${ids.blogger}`)).toEqual([]);
  });

  it("neither removes nor re-roles a member stronger than the caller: a co-admin with more keys, a platform operator", async () => {
    const { tables, revoked, call } = stack();
    tables.users.set(ids.boss, user(ids.boss, "boss"));
    tables.users.set(ids.operator, user(ids.operator, "op", "operator"));
    tables.memberships.set(`acme-shop ${ids.boss}`, ["admin", "hooks"]);
    tables.memberships.set(`acme-shop ${ids.operator}`, []);
    const stronger = { code: ErrorCode.Forbidden, extensions: { rule: "target-holds-more-rights" } };
    for (const userId of [ids.boss, ids.operator]) {
      const params = { workspaceKey: "acme-shop", userId };
      await expect(call("members.delete", members.deleteMember, shopAdmin, { params })).rejects.toMatchObject(
        stronger,
      );
      await expect(
        call("member-roles.put", members.putMemberRoles, shopAdmin, { params, body: { roles: [] } }),
      ).rejects.toMatchObject(stronger);
    }
    expect(tables.memberships.get(`acme-shop ${ids.boss}`)).toEqual(["admin", "hooks"]);
    expect(tables.memberships.has(`acme-shop ${ids.operator}`)).toBe(true);
    expect(revoked).toEqual([]);
    // One who holds what they hold may.
    const root: Principal = { ...shopAdmin, roles: ["superadmin"] };
    expect(
      (
        await call("members.delete", members.deleteMember, root, {
          params: { workspaceKey: "acme-shop", userId: ids.boss },
        })
      ).status,
    ).toBe(204);
  });
});
