/**
 * Sign-in with the users, memberships and roles in memory: no NATS, no PostgreSQL. A wrong password, an
 * unknown or inactive user, a workspace the user is not a member of and one the resolver does not know
 * all get the one uniform refusal; a turned-off workspace or suspended tenant is refused plainly to a
 * member only; a workspace session carries its member roles (never superadmin) and only the keys a
 * workspace may hold; a platform session only a platform role's; the session is recorded with the token.
 */
import { Writable } from "node:stream";

import { callMessage, type LoginRequest, rbacMessages, refusalOf } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { createLogger } from "@svc/observability";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";

import { hashPassword, passwords, verifyPassword } from "./passwords.js";
import type { RoleRow, UserRow } from "./repository.js";
import { login, logout, type SessionTables, type SignInDeps, type SignInTables } from "./sign-in.js";

const role = (name: string, scope: RoleRow["scope"], permissions: string[]): RoleRow => ({
  name,
  description: name,
  scope,
  permissions,
  source: "custom",
});
const roles = new Map(
  [
    role("operator", "platform", ["user.read", "user.update"]),
    role("editor", "workspace", ["workspace.read"]),
    role("shop-editor", "workspace", ["workspace.read", "user.create", "crm.contact.read", "mail.send", "*"]),
    role("superadmin", "platform", ["*"]),
  ].map((r) => [r.name, r]),
);

/** The users' password hashes: at the configured cost (10 here), and another password's. */
let hash: string;
let otherHash: string;
beforeAll(async () => {
  [hash, otherHash] = await Promise.all([
    hashPassword("right-password", 10),
    hashPassword("other-password", 10),
  ]);
});

const user = (id: string, userName: string, more: Partial<UserRow> = {}): UserRow => ({
  id,
  user_name: userName,
  display_name: userName,
  email: null,
  password_hash: hash,
  is_active: true,
  global_role: null,
  created_at: new Date(0),
  updated_at: new Date(0),
  ...more,
});

class MemorySignIn implements SignInTables {
  readonly users = new Map<string, UserRow>();
  /** `workspace/user` → member roles. */
  readonly members = new Map<string, string[]>();
  readonly sessions: Array<{
    id: string;
    userId: string;
    workspaceKey: string | null;
    roles: readonly string[];
    lifetimeSeconds: number;
  }> = [];
  readonly revokedIds = new Set<string>();
  /** Runs before the session's change reads anything (a concurrent change between the checks and the change). */
  meanwhile: (() => void) | undefined;
  /** Hash renewals asked for; `failRehash` makes the next one fail. */
  readonly rehashes: string[] = [];
  failRehash = false;

  async userByName(userName: string) {
    return [...this.users.values()].find((u) => u.user_name.toLowerCase() === userName.toLowerCase()) ?? null;
  }
  async isMember(workspaceKey: string, userId: string) {
    return this.members.has(`${workspaceKey}/${userId}`);
  }
  async session<T>(open: (tables: SessionTables) => Promise<T>): Promise<T> {
    this.meanwhile?.();
    return open({
      user: async (id) => this.users.get(id) ?? null,
      isMember: async (workspaceKey, userId) => this.isMember(workspaceKey, userId),
      memberRoles: async (workspaceKey, userId) =>
        (this.members.get(`${workspaceKey}/${userId}`) ?? [])
          .sort()
          .map((name) => ({ role: name, permissions: roles.get(name)?.permissions ?? [] })),
      role: async (name) => roles.get(name) ?? null,
      record: async (session) => void this.sessions.push({ ...session, roles: [...session.roles] }),
    });
  }
  async rehash(userId: string, from: string, to: string) {
    if (this.failRehash) throw new Error("connection terminated");
    this.rehashes.push(userId);
    const u = this.users.get(userId);
    if (u?.password_hash === from) this.users.set(userId, { ...u, password_hash: to });
  }
  async openSession(sessionId: string, userId: string) {
    const s = this.sessions.find((x) => x.id === sessionId && x.userId === userId);
    return s === undefined || this.revokedIds.has(s.id)
      ? null
      : { id: s.id, expires_at: new Date(s.lifetimeSeconds * 1_000) };
  }
}

/** Workspaces the resolver knows: key → [workspace active, tenant active]. */
const workspaces: Record<string, [boolean, boolean]> = {
  shop: [true, true],
  closed: [false, true],
  frozen: [true, false],
};

let tables: MemorySignIn;
let deps: SignInDeps;
let lifetimeReads: number;
/** What the sign-in logged at warn and above, one JSON line each. */
let logged: string[];
beforeEach(() => {
  tables = new MemorySignIn();
  logged = [];
  const lines = logged;
  lifetimeReads = 0;
  for (const u of [
    user("u-ops", "Alice", { global_role: "operator" }),
    user("u-gone", "bob", { is_active: false, global_role: "operator" }),
    user("u-ws", "carol", { global_role: "editor" }),
    user("u-member", "dave"),
  ])
    tables.users.set(u.id, u);
  for (const key of ["shop", "closed", "frozen", "ghost"])
    tables.members.set(`${key}/u-member`, ["shop-editor", "superadmin"]);
  deps = {
    signIn: tables,
    issuer: { sign: async (claims, lifetime) => JSON.stringify({ claims, lifetime }) },
    passwords: passwords(10),
    log: createLogger(
      "rbac-test",
      "warn",
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    ),
    // Read once per sign-in: each read gives another value, so the session and the token must share one.
    lifetimeSeconds: () => 900 + lifetimeReads++,
    activePlugins: (workspaceKey) => new Set(workspaceKey === "shop" ? ["crm"] : []),
    tenancy: async (request) => ({
      workspaces: request.workspaceKeys.flatMap((k) => {
        const state = workspaces[k];
        return state === undefined
          ? []
          : [{ workspaceKey: k, tenantKey: "acme", isActive: state[0], tenantIsActive: state[1] }];
      }),
      tenants: [],
    }),
  };
});

const signIn = async (userName: string, password = "right-password", workspaceKey?: string) => {
  const request: LoginRequest =
    workspaceKey === undefined ? { userName, password } : { userName, password, workspaceKey };
  const reply = await callMessage(rbacMessages["auth.login"], (req) => login(deps, req), request);
  return JSON.parse(reply.accessToken) as { claims: Record<string, unknown>; lifetime: number };
};

describe("sign-in", () => {
  it("gives a platform session the platform role's keys, for the setting's lifetime, and records it", async () => {
    const { claims, lifetime } = await signIn("alice");
    expect(claims).toMatchObject({
      sub: "u-ops",
      svc_scope: "platform",
      role: ["operator"],
      permission: ["user.read", "user.update"],
      name: "Alice",
    });
    expect(lifetime).toBe(900);
    // The session recorded is the token's: its id, the same lifetime.
    expect(tables.sessions).toEqual([
      { id: claims.sid, userId: "u-ops", workspaceKey: null, roles: ["operator"], lifetimeSeconds: 900 },
    ]);
    expect(lifetimeReads).toBe(1);
  });

  it("refuses a wrong password, an unknown user and an inactive one alike, recording nothing", async () => {
    const refusals = await Promise.all([
      refusalOf(signIn("alice", "wrong-password")),
      refusalOf(signIn("nobody")),
      refusalOf(signIn("bob")),
    ]);
    for (const error of refusals) {
      expect(error.code).toBe(ErrorCode.Unauthenticated);
      expect(error.message).toBe("Invalid user name or password.");
    }
    expect(tables.sessions).toEqual([]);
  });

  it("gives a workspace-scope role held as a global role no scope and no keys", async () => {
    const { claims } = await signIn("carol");
    expect(claims).not.toHaveProperty("svc_scope");
    expect(claims).toMatchObject({ role: [], permission: [] });
  });

  it("gives a workspace session its member roles but superadmin, and only keys a workspace may hold", async () => {
    const { claims } = await signIn("dave", "right-password", " shop ");
    expect(claims).toMatchObject({
      svc_scope: "workspace",
      workspace_key: "shop",
      role: ["shop-editor"],
      // Core keys a workspace administrator may hold, the active plugin's own keys; no other plugin's, no `*`.
      permission: ["crm.contact.read", "workspace.read"],
    });
    expect(tables.sessions).toMatchObject([
      { userId: "u-member", workspaceKey: "shop", roles: ["shop-editor"] },
    ]);
  });

  it("refuses a workspace the user is not a member of, or the resolver does not know, as a wrong password", async () => {
    tables.users.set("u-left", user("u-left", "erin", { is_active: false }));
    tables.members.set("closed/u-left", ["editor"]);
    for (const [who, workspaceKey] of [
      ["alice", "shop"],
      // A non-member, or an inactive member, learns nothing of a closed workspace's state.
      ["alice", "closed"],
      ["alice", "frozen"],
      ["erin", "closed"],
      ["dave", "ghost"],
    ] as const) {
      const error = await refusalOf(signIn(who, "right-password", workspaceKey));
      expect(error.code).toBe(ErrorCode.Unauthenticated);
      expect(error.message).toBe("Invalid user name or password.");
    }
    expect(tables.sessions).toEqual([]);
  });

  it("tells a member plainly that the workspace is turned off or its tenant suspended", async () => {
    expect((await refusalOf(signIn("dave", "right-password", "closed"))).extensions).toMatchObject({
      rule: "workspace-inactive",
    });
    expect((await refusalOf(signIn("dave", "right-password", "frozen"))).extensions).toMatchObject({
      rule: "tenant-suspended",
    });
    // A wrong password learns nothing of the workspace's state.
    expect((await refusalOf(signIn("dave", "wrong-password", "closed"))).code).toBe(
      ErrorCode.Unauthenticated,
    );
  });

  it("refuses a session whose user changed since the password was checked: deactivated, new password, membership gone", async () => {
    const changes: Array<() => void> = [
      () => tables.users.set("u-ops", { ...(tables.users.get("u-ops") as UserRow), is_active: false }),
      () =>
        tables.users.set("u-ops", {
          ...(tables.users.get("u-ops") as UserRow),
          password_hash: otherHash,
        }),
    ];
    for (const change of changes) {
      tables.meanwhile = change;
      expect((await refusalOf(signIn("alice"))).code).toBe(ErrorCode.Unauthenticated);
      tables.users.set("u-ops", user("u-ops", "Alice", { global_role: "operator" }));
    }
    tables.meanwhile = () => tables.members.delete("shop/u-member");
    expect((await refusalOf(signIn("dave", "right-password", "shop"))).code).toBe(ErrorCode.Unauthenticated);
    expect(tables.sessions).toEqual([]);
  });

  it("renews a hash made at another cost, once, at a sign-in with the right password, keeping the password", async () => {
    const older = await hashPassword("right-password", 11);
    tables.users.set("u-ops", user("u-ops", "Alice", { global_role: "operator", password_hash: older }));
    expect((await refusalOf(signIn("alice", "wrong-password"))).code).toBe(ErrorCode.Unauthenticated);
    expect(tables.users.get("u-ops")?.password_hash).toBe(older);

    const { claims } = await signIn("alice");
    expect(claims.sub).toBe("u-ops");
    const renewed = tables.users.get("u-ops")?.password_hash as string;
    expect(renewed).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(await verifyPassword("right-password", renewed)).toBe(true);
    expect(await verifyPassword("wrong-password", renewed)).toBe(false);
    // At the configured cost now: the next sign-in leaves it.
    await signIn("alice");
    expect(tables.users.get("u-ops")?.password_hash).toBe(renewed);
    expect(tables.rehashes).toEqual(["u-ops"]);
    expect(tables.sessions).toHaveLength(2);
  });

  it("signs in when another sign-in renewed the hash meanwhile, and when renewing fails (logged)", async () => {
    const older = await hashPassword("right-password", 11);
    tables.users.set("u-ops", user("u-ops", "Alice", { global_role: "operator", password_hash: older }));
    // Another replica's sign-in renewed it between this one's check of the password and its session.
    tables.meanwhile = () =>
      tables.users.set("u-ops", { ...(tables.users.get("u-ops") as UserRow), password_hash: hash });
    expect((await signIn("alice")).claims.sub).toBe("u-ops");
    // The renewal this sign-in asked for found the hash changed and left it.
    expect(tables.users.get("u-ops")?.password_hash).toBe(hash);

    tables.meanwhile = undefined;
    tables.users.set("u-ops", user("u-ops", "Alice", { global_role: "operator", password_hash: older }));
    tables.failRehash = true;
    expect((await signIn("alice")).claims.sub).toBe("u-ops");
    expect(tables.users.get("u-ops")?.password_hash).toBe(older);
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0] as string)).toMatchObject({
      level: 40,
      userId: "u-ops",
      msg: "renewing a password hash at the configured cost failed",
    });
    // The password is in no log line.
    expect(logged[0]).not.toContain("right-password");
  });
});

describe("sign-out", () => {
  const signOut = (sessionId: string, subject: string, revoked: string[]) =>
    callMessage(
      rbacMessages["auth.logout"],
      (req) =>
        logout(
          {
            signIn: tables,
            revokeSessions: async (sessions) => {
              for (const x of sessions) {
                revoked.push(`${x.id} until ${x.expires_at.getTime()}`);
                tables.revokedIds.add(x.id);
              }
            },
          },
          req,
        ),
      { sessionId, subject },
    );

  it("revokes the caller's own open session, with its expiry, once", async () => {
    const token = await signIn("Alice");
    const sessionId = token.claims.sid as string;
    const revoked: string[] = [];
    expect(await signOut(sessionId, "u-ops", revoked)).toEqual({ revoked: true });
    expect(revoked).toEqual([`${sessionId} until ${token.lifetime * 1_000}`]);
    // Already revoked: nothing more.
    expect(await signOut(sessionId, "u-ops", revoked)).toEqual({ revoked: false });
    expect(revoked).toHaveLength(1);
  });

  it("leaves another user's session and an unknown one as they are, and refuses a malformed id", async () => {
    const sessionId = (await signIn("Alice")).claims.sid as string;
    const revoked: string[] = [];
    expect(await signOut(sessionId, "u-member", revoked)).toEqual({ revoked: false });
    expect(await signOut(crypto.randomUUID(), "u-ops", revoked)).toEqual({ revoked: false });
    expect(revoked).toEqual([]);
    const refusal = await refusalOf(signOut("not-a-session", "u-ops", revoked));
    expect(refusal.code).toBe(ErrorCode.ValidationFailed);
  });
});
