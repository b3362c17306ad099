/**
 * Sign-in, tokens and the JWKS, token tampering, `alg: none`, expiry, the break-glass API key,
 * users and memberships with member-role filtering, workspace reach, and the events they publish.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { gatewayService } from "@svc/service-gateway";
import { hashPassword, rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { createLocalJWKSet, decodeJwt, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, http } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const API_KEY = "identity-test-api-key-0123456789";
let base: string;

const api = bearerApi(() => base);
async function login(username: string, password: string, workspaceKey?: string) {
  return api("POST", "/api/auth/login", null, {
    username,
    password,
    ...(workspaceKey ? { workspaceKey } : {}),
  });
}

let operator: string;

beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    BackendHost__EnableBootstrapApiKeys: "true",
    BackendHost__ApiKeys__0: API_KEY,
  };
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  // Bootstrap an operator the way the operator CLI does: a user with the superadmin global role.
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  const created = await api("POST", "/api/users", operator, {
    userName: "alice",
    password: "correct horse battery",
    displayName: "Alice",
  });
  expect(created.status).toBe(201);
  const alice = created.json<{ id: string }>();
  expect((await api("PUT", `/api/rbac/users/${alice.id}`, operator, { role: "superadmin" })).status).toBe(
    200,
  );
  // Memberships are only in workspaces that exist.
  expect((await api("POST", "/api/tenants", operator, { tenantKey: "acme", name: "Acme" })).status).toBe(201);
  const acme = await api("PUT", "/api/workspaces/acme", operator, { tenantKey: "acme", name: "Acme" });
  expect(acme.status).toBe(201);
});
afterAll(() => h.stopAll());

describe("sign-in", () => {
  it("issues an ES256 token with scope, permissions, roles and a session id, verifiable with the JWKS", async () => {
    const response = await login("alice", "correct horse battery");
    expect(response.status).toBe(200);
    const body = response.json<{ accessToken: string; tokenType: string; expiresIn: number }>();
    expect(body.tokenType).toBe("Bearer");
    expect(body.expiresIn).toBe(3600);
    const jwks = (await http(`${base}/.well-known/jwks.json`)).json<{
      keys: Array<{ kty: string; alg: string; d?: string }>;
    }>();
    expect(jwks.keys[0]).toMatchObject({ kty: "EC", alg: "ES256" });
    expect(jwks.keys[0]?.d).toBeUndefined();
    const { payload, protectedHeader } = await jwtVerify(body.accessToken, createLocalJWKSet(jwks as never));
    expect(protectedHeader.alg).toBe("ES256");
    expect(payload).toMatchObject({ svc_scope: "platform", permission: ["*"], role: ["superadmin"] });
    expect(typeof payload.sid).toBe("string");
    expect((await api("GET", "/api/rbac/roles", body.accessToken)).status).toBe(200);
  });

  it("answers 401 without saying which part was wrong", async () => {
    const wrongPassword = await login("alice", "not the password");
    const unknownUser = await login("nobody", "not the password");
    expect(wrongPassword.status).toBe(401);
    expect(unknownUser.status).toBe(401);
    expect(wrongPassword.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(wrongPassword.json<{ detail: string }>().detail).toBe(
      unknownUser.json<{ detail: string }>().detail,
    );
  });

  it("renews a hash made at an older cost at the next sign-in, leaving updated_at and the sessions", async () => {
    // An account whose hash predates the cost setting (the suite's cost is 10; this one is 11).
    const older = await hashPassword("an older password hash", 11);
    const [made] = await h.sql<{ id: string }>(
      `INSERT INTO rbac.users (id, user_name, display_name, password_hash, global_role, updated_at)
       VALUES (gen_random_uuid(), 'olga', 'Olga', $1, 'superadmin', now() - interval '1 day') RETURNING id::text`,
      [older],
    );
    const stored = async () =>
      (
        await h.sql<{ password_hash: string; day_old: boolean }>(
          `SELECT password_hash, updated_at < now() - interval '23 hours' AS day_old FROM rbac.users WHERE id = $1`,
          [made?.id],
        )
      )[0];
    expect((await login("olga", "not the password")).status).toBe(401);
    expect((await stored())?.password_hash).toBe(older);
    const first = await login("olga", "an older password hash");
    expect(first.status).toBe(200);
    const renewed = await stored();
    expect(renewed?.password_hash).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(renewed?.day_old).toBe(true);
    // The first session's token still works, and the password still signs in.
    const token = first.json<{ accessToken: string }>().accessToken;
    expect((await api("GET", "/api/rbac/roles", token)).status).toBe(200);
    expect((await login("olga", "an older password hash")).status).toBe(200);
    expect((await stored())?.password_hash).toBe(renewed?.password_hash);
  });

  it("rejects a malformed body with a 400 listing the violation", async () => {
    const response = await api("POST", "/api/auth/login", null, { username: "alice" });
    expect(response.status).toBe(400);
    expect(response.json()).toMatchObject({
      status: 400,
      errors: [expect.objectContaining({ field: expect.stringContaining("password") })],
    });
  });
});

describe("tokens the gateway refuses", () => {
  it("a tampered token", async () => {
    const token = await mintToken({ scope: "platform", permissions: ["role.read"] });
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
    claims.permission = ["*"];
    const forged = `${header}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${signature}`;
    expect((await api("GET", "/api/rbac/roles", forged)).status).toBe(401);
  });

  it("alg: none", async () => {
    const token = await mintToken({ scope: "platform", roles: ["superadmin"] });
    const payload = token.split(".")[1];
    const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${payload}.`;
    expect((await api("GET", "/api/rbac/roles", none)).status).toBe(401);
  });

  it("an expired token, and one from another issuer", async () => {
    const expired = await api(
      "GET",
      "/api/rbac/roles",
      await mintToken({ roles: ["superadmin"], expiresIn: -60 }),
    );
    expect(expired.status).toBe(401);
    expect(expired.json<{ detail: string }>().detail).toMatch(/expired/);
    expect(
      (await api("GET", "/api/rbac/roles", await mintToken({ roles: ["superadmin"], issuer: "evil" })))
        .status,
    ).toBe(401);
  });

  it("a malformed Authorization header", async () => {
    expect(
      (await api("GET", "/api/rbac/roles", null, undefined, { headers: { authorization: "Basic abc" } }))
        .status,
    ).toBe(401);
  });
});

describe("the break-glass API key", () => {
  it("is host.api: platform reach, no authority until host.api is granted a key", async () => {
    const headers = { "x-svc-api-key": API_KEY };
    expect((await api("GET", "/api/rbac/roles", null, undefined, { headers })).status).toBe(403);
    expect(
      (await api("GET", "/api/rbac/roles", null, undefined, { headers: { "x-svc-api-key": `${API_KEY}x` } }))
        .status,
    ).toBe(401);
    expect(
      (await api("PUT", "/api/rbac/roles/host.api", operator, { permissions: ["role.read"] })).status,
    ).toBe(200);
    // The grant reaches the gateway's cache through the rbac.roles.changed broadcast.
    const until = Date.now() + 3_000;
    let status = 0;
    while (Date.now() < until && status !== 200) {
      status = (await api("GET", "/api/rbac/roles", null, undefined, { headers })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
    expect((await api("PUT", "/api/rbac/roles/host.api", operator, { permissions: [] })).status).toBe(200);
  });
});

describe("users, memberships and member roles", () => {
  it("a workspace admin removes no member who holds a key there it lacks; a stronger role elsewhere does not count", async () => {
    const ok = (r: { status: number; text: string }, status: number) => expect(r.status, r.text).toBe(status);
    ok(await api("PUT", "/api/workspaces/acme-two", operator, { tenantKey: "acme", name: "Acme two" }), 201);
    ok(await api("PUT", "/api/rbac/roles/hook-keeper", operator, { permissions: ["webhook.manage"] }), 201);
    const member = async (userName: string) =>
      (
        await api("POST", "/api/users", operator, { userName, password: `${userName}'s long password` })
      ).json<{ id: string }>().id;
    const carol = await member("carol");
    const dave = await member("dave");
    ok(await api("PUT", `/api/workspaces/acme/members/${carol}`, operator), 201);
    ok(
      await api("PUT", `/api/workspaces/acme/members/${carol}/roles`, operator, { roles: ["hook-keeper"] }),
      200,
    );
    // dave holds the stronger role in acme-two only: in acme he holds nothing.
    ok(await api("PUT", `/api/workspaces/acme/members/${dave}`, operator), 201);
    ok(await api("PUT", `/api/workspaces/acme-two/members/${dave}`, operator), 201);
    ok(
      await api("PUT", `/api/workspaces/acme-two/members/${dave}/roles`, operator, {
        roles: ["hook-keeper"],
      }),
      200,
    );
    const acmeAdmin = await mintToken({
      scope: "workspace",
      workspaceKey: "acme",
      roles: ["admin"],
      permissions: ["membership.delete", "membership.read", "membership.update", "user.read"],
    });
    const refused = await api("DELETE", `/api/workspaces/acme/members/${carol}`, acmeAdmin);
    expect(refused.status, refused.text).toBe(403);
    expect(refused.json()).toMatchObject({ rule: "target-holds-more-rights" });
    ok(await api("DELETE", `/api/workspaces/acme/members/${dave}`, acmeAdmin), 204);
    // What the later tests count starts as it was.
    for (const id of [carol, dave]) ok(await api("DELETE", `/api/users/${id}`, operator), 204);
    ok(await api("DELETE", "/api/workspaces/acme-two", operator), 204);
    ok(await api("DELETE", "/api/rbac/roles/hook-keeper", operator), 204);
  });

  it("signs a member in to a workspace with filtered member-role keys and reaches only that workspace", async () => {
    const bob = (
      await api("POST", "/api/users", operator, { userName: "bob", password: "bob's long password" })
    ).json<{ id: string }>();
    // Not a member yet: a workspace sign-in fails like bad credentials.
    expect((await login("bob", "bob's long password", "acme")).status).toBe(401);
    expect((await api("PUT", `/api/workspaces/acme/members/${bob.id}`, operator)).status).toBe(201);
    expect(
      (
        await api("PUT", "/api/rbac/roles/acme-ops", operator, {
          permissions: ["tenant.create", "webhook.read", "user.update", "*"],
        })
      ).status,
    ).toBe(201);
    const roles = await api("PUT", `/api/workspaces/acme/members/${bob.id}/roles`, operator, {
      roles: ["admin", "acme-ops"],
    });
    expect(roles.json()).toEqual({ userId: bob.id, roles: ["acme-ops", "admin"] });
    expect((await api("GET", `/api/workspaces/acme/members/${bob.id}/roles`, operator)).json()).toEqual({
      userId: bob.id,
      roles: ["acme-ops", "admin"],
    });
    // superadmin cannot be a member role.
    expect(
      (await api("PUT", `/api/workspaces/acme/members/${bob.id}/roles`, operator, { roles: ["superadmin"] }))
        .status,
    ).toBe(400);

    const signIn = await login("bob", "bob's long password", "acme");
    expect(signIn.status).toBe(200);
    const token = signIn.json<{ accessToken: string }>().accessToken;
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({
      svc_scope: "workspace",
      workspace_key: "acme",
      role: ["acme-ops", "admin"],
    });
    // tenant.create, user.update and * never survive in a workspace session.
    expect(claims.permission).toEqual([
      "membership.delete",
      "membership.read",
      "membership.update",
      "user.read",
      "webhook.read",
    ]);

    // Reach: its own workspace's members, another workspace is 404, user writes are platform-only.
    expect((await api("GET", "/api/workspaces/acme/members", token)).status).toBe(200);
    expect((await api("GET", "/api/workspaces/other/members", token)).status).toBe(404);
    const users = (await api("GET", "/api/users", token)).json<{ items: Array<{ userName: string }> }>();
    expect(users.items.map((u) => u.userName)).toEqual(["bob"]);
    const alice = (await api("GET", "/api/users", operator))
      .json<{ items: Array<{ id: string; userName: string }> }>()
      .items.find((u) => u.userName === "alice");
    expect((await api("GET", `/api/users/${alice?.id}`, token)).status).toBe(404);
    expect((await api("GET", `/api/users/${bob.id}/data-export`, token)).status).toBe(403);

    // Removing the membership ends its sessions.
    expect((await api("DELETE", `/api/workspaces/acme/members/${bob.id}`, operator)).status).toBe(204);
    const until = Date.now() + 2_000;
    let status = 200;
    while (Date.now() < until && status !== 401)
      status = (await api("GET", "/api/workspaces/acme/members", token)).status;
    expect(status).toBe(401);
  });

  it("exports a user's data for platform operators and publishes user and membership events", async () => {
    const carol = (
      await api("POST", "/api/users", operator, {
        userName: "carol",
        password: "carol's long password",
        email: "carol@example.com",
      })
    ).json<{ id: string }>();
    expect((await api("PUT", `/api/workspaces/acme/members/${carol.id}`, operator)).status).toBe(201);
    const exported = await api("GET", `/api/users/${carol.id}/data-export`, operator);
    expect(exported.status).toBe(200);
    expect(exported.json()).toMatchObject({
      user: { userName: "carol", email: "carol@example.com" },
      memberships: [{ workspaceKey: "acme" }],
    });
    expect(exported.text).not.toContain("scrypt");
    expect(
      (await api("PUT", `/api/users/${carol.id}`, operator, { displayName: "Carol C" })).json(),
    ).toMatchObject({ displayName: "Carol C" });
    expect((await api("DELETE", `/api/users/${carol.id}`, operator)).status).toBe(204);
    expect((await api("GET", `/api/users/${carol.id}`, operator)).status).toBe(404);

    const nc = await connect(h.natsOptions());
    try {
      const jsm = await jetstreamManager(nc);
      const stream = h.env.SVC_EVENTS_STREAM as string;
      const prefix = h.env.SVC_SUBJECT_PREFIX as string;
      for (const event of ["user.created", "user.updated", "user.deleted", "workspace.member-assigned"]) {
        const msg = await jsm.streams.getMessage(stream, { last_by_subj: `${prefix}.events.${event}` });
        expect(msg).not.toBeNull();
      }
      const assigned = await jsm.streams.getMessage(stream, {
        last_by_subj: `${prefix}.events.workspace.member-assigned`,
      });
      expect(assigned?.header.get("Svc-Workspace-Key")).toBe("acme");
      expect(assigned?.json()).toMatchObject({ workspaceKey: "acme", userId: carol.id });
      const created = await jsm.streams.getMessage(stream, { last_by_subj: `${prefix}.events.user.created` });
      expect(created?.string()).not.toContain("password");
    } finally {
      await nc.close();
    }
  });

  it("refuses unknown permission keys in a role with 400 per key", async () => {
    const response = await api("PUT", "/api/rbac/roles/bad-role", operator, {
      permissions: ["job.read", "nope.read"],
    });
    expect(response.status).toBe(400);
    expect(response.json()).toMatchObject({
      errors: [{ field: "/body/permissions", message: "unknown permission key 'nope.read'" }],
    });
  });

  it("shows an integration's secret once and never again", async () => {
    const created = await api("POST", "/api/security/integrations", operator, {
      name: "crm",
      permissions: ["job.read"],
    });
    expect(created.status).toBe(201);
    const secret = created.json<{ clientSecret: string }>().clientSecret;
    expect(secret.length).toBeGreaterThan(30);
    const listed = await api("GET", "/api/security/integrations", operator);
    expect(listed.text).not.toContain(secret);
    expect(listed.json()).toEqual([expect.objectContaining({ name: "crm", permissions: ["job.read"] })]);
  });
});

describe("sessions and notifications past their retention", () => {
  it("are deleted by rbac at start: sessions expired SessionRetentionDays ago, notifications made NotificationRetentionDays ago", async () => {
    const dave = (
      await api("POST", "/api/users", operator, { userName: "dave", password: "dave's long password" })
    ).json<{ id: string }>();
    expect((await login("dave", "dave's long password")).status).toBe(200);
    const session = async (expiredHoursAgo: number) =>
      (
        await h.sql<{ id: string }>(
          `INSERT INTO rbac.sessions (id, user_id, roles, created_at, expires_at)
           VALUES (gen_random_uuid(), $1, '{}', now() - make_interval(hours => $2 + 1), now() - make_interval(hours => $2))
           RETURNING id::text`,
          [dave.id, expiredHoursAgo],
        )
      )[0]?.id;
    const notification = async (daysAgo: number, read: boolean) =>
      (
        await h.sql<{ id: string }>(
          `INSERT INTO rbac.notifications (id, user_id, event_id, kind, title, created_at, read_at)
           VALUES (gen_random_uuid(), $1, gen_random_uuid()::text, 'job.dead-lettered', 'Job', now() - make_interval(days => $2),
                   CASE WHEN $3 THEN now() END)
           RETURNING id::text`,
          [dave.id, daysAgo, read],
        )
      )[0]?.id;
    const oldSession = await session(50);
    const recentSession = await session(20);
    const oldUnread = await notification(40, false);
    const oldRead = await notification(40, true);
    const recentNotification = await notification(20, false);
    const ids = async (table: string) =>
      (await h.sql<{ id: string }>(`SELECT id::text FROM rbac.${table} WHERE user_id = $1`, [dave.id])).map(
        (r) => r.id,
      );
    expect(await ids("sessions")).toHaveLength(3);

    // Another replica, keeping expired sessions a day and notifications 30 days: it sweeps as it starts.
    const replica = await h.start(rbacService, {
      BackendHost__SessionRetentionDays: "1",
      BackendHost__NotificationRetentionDays: "30",
    });
    await until(async () => !(await ids("sessions")).includes(oldSession as string));
    await until(async () => (await ids("notifications")).length === 1);
    expect(await ids("notifications")).toEqual([recentNotification]);
    expect([oldUnread, oldRead]).not.toContain(recentNotification);
    const left = await ids("sessions");
    expect(left).toHaveLength(2);
    expect(left).toContain(recentSession);
    const exported = await api("GET", `/api/users/${dave.id}/data-export`, operator);
    expect(
      exported
        .json<{ sessions: Array<{ id: string }> }>()
        .sessions.map((s) => s.id)
        .sort(),
    ).toEqual([...left].sort());
    await replica.stop();
  });
});
