/**
 * The role model lets no one raise their own rights.
 * A workspace-scope role is no global role and gives no platform session; the system role `admin` keeps
 * the spec's grants; a workspace admin cannot give a member (itself included) a role carrying keys it does
 * not hold; a workspace session naming another workspace gets 404 whatever keys it lacks; and the rules
 * nothing asserted before (superadmin as a member role, an expired API key, a deleted role's sessions,
 * an empty role list).
 */
import { createDb } from "@svc/db";
import { gatewayService } from "@svc/service-gateway";
import { rbacService, reportWorkspaceGlobalRoles } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, http, signIn } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
let base: string;
let operator: string;

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);
const EXPIRED_KEY = "an-expired-break-glass-key-0123456789abcdef";

afterAll(() => h.stopAll());
beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__RateLimitAuthPerAccountPerMinute: "0",
  };
  await h.start(resolverService, env);
  await h.start(rbacService, env);
  base = (
    await h.start(gatewayService, {
      ...env,
      BackendHost__EnableBootstrapApiKeys: "true",
      BackendHost__ApiKeys__0: EXPIRED_KEY,
      BackendHost__BootstrapApiKeysExpireAtUtc: "2020-01-01T00:00:00Z",
    })
  ).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});

async function user(name: string): Promise<string> {
  const created = await asOperator("POST", "/api/users", {
    userName: name,
    password: `${name}-long-password`,
  });
  expect(created.status, created.text).toBe(201);
  return created.json<{ id: string }>().id;
}
const login = (name: string, workspaceKey?: string) =>
  signIn(base, {
    username: name,
    password: `${name}-long-password`,
    ...(workspaceKey ? { workspaceKey } : {}),
  });
const tokenOf = async (name: string, workspaceKey?: string) => {
  const answer = await login(name, workspaceKey);
  expect(answer.status, answer.text).toBe(200);
  return answer.json<{ accessToken: string }>().accessToken;
};
const claims = (token: string) => decodeJwt(token);

describe("roles, scope and reach", () => {
  it("a workspace-scope role is refused as a global role, and gives no platform session", async () => {
    const id = await user("global-admin");
    const refused = await asOperator("PUT", `/api/rbac/users/${id}`, { role: "admin" });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.json())).toMatch(/global role must be a platform-scope role/);
    // A user who got one before the rule (written straight into the table here) is reported at start-up
    // and signs in with no scope and no keys.
    await h.sql("UPDATE rbac.users SET global_role = 'admin' WHERE id = $1", [id]);
    const reported: unknown[] = [];
    const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 1, applicationName: "role-rights-test" });
    const names = await reportWorkspaceGlobalRoles(db, {
      warn: (details: object) => reported.push(details),
    }).finally(() => db.end());
    expect(names).toEqual(["global-admin"]);
    expect(reported).toHaveLength(1);
    const session = claims(await tokenOf("global-admin"));
    expect(session.svc_scope).toBeUndefined();
    expect(session.permission).toEqual([]);
    expect((await api("GET", "/api/tenants", await tokenOf("global-admin"))).status).toBe(403);
    // A platform role is still a global role.
    expect((await asOperator("PUT", `/api/rbac/users/${id}`, { role: "host.api" })).status).toBe(200);
  });

  it("the admin role keeps the spec's grants; its description may change, its scope may not", async () => {
    const widened = await asOperator("PUT", "/api/rbac/roles/admin", {
      permissions: ["membership.read", "membership.update", "membership.delete", "user.read", "user.create"],
    });
    expect(widened.status).toBe(409);
    expect(widened.json()).toMatchObject({ rule: "system-role-grants", role: "admin" });
    const rescoped = await asOperator("PUT", "/api/rbac/roles/host.api", {
      permissions: [],
      scope: "workspace",
    });
    expect(rescoped.status).toBe(409);
    expect(rescoped.json()).toMatchObject({ rule: "system-role-scope" });
    const described = await asOperator("PUT", "/api/rbac/roles/admin", {
      permissions: ["user.read", "membership.delete", "membership.update", "membership.read"],
      description: "Workspace administrators",
    });
    expect(described.status, described.text).toBe(200);
    const roles = (await asOperator("GET", "/api/rbac/roles")).json<
      Array<{ name: string; permissions: string[] }>
    >();
    expect(roles.find((r) => r.name === "admin")?.permissions.sort()).toEqual([
      "membership.delete",
      "membership.read",
      "membership.update",
      "user.read",
    ]);
  });

  it("a workspace admin cannot give itself, or anyone, a role carrying a key it does not hold", async () => {
    expect(
      (await asOperator("PUT", "/api/rbac/roles/hooks", { permissions: ["webhook.manage"] })).status,
    ).toBe(201);
    const self = await user("ws-admin");
    const other = await user("ws-member");
    for (const id of [self, other])
      expect((await asOperator("PUT", `/api/workspaces/default/members/${id}`)).status).toBe(201);
    expect(
      (await asOperator("PUT", `/api/workspaces/default/members/${self}/roles`, { roles: ["admin"] })).status,
    ).toBe(200);
    const admin = await tokenOf("ws-admin", "default");
    for (const id of [self, other]) {
      const raised = await api("PUT", `/api/workspaces/default/members/${id}/roles`, admin, {
        roles: ["admin", "hooks"],
      });
      expect(raised.status).toBe(403);
      expect(raised.json()).toMatchObject({
        missingPermission: "webhook.manage",
        rule: "grant-only-held-keys",
      });
    }
    // What it holds it may give.
    expect(
      (await api("PUT", `/api/workspaces/default/members/${other}/roles`, admin, { roles: ["admin"] }))
        .status,
    ).toBe(200);
    // A platform session that may define roles is not limited.
    expect(
      (await asOperator("PUT", `/api/workspaces/default/members/${other}/roles`, { roles: ["hooks"] }))
        .status,
    ).toBe(200);
  });

  it("a workspace session naming another workspace gets 404 even for a route whose key it lacks", async () => {
    const member = await mintToken({ scope: "workspace", workspaceKey: "default", permissions: [] });
    const elsewhere = await api("GET", "/api/themes/workspaces/other-ws/settings", member);
    expect(elsewhere.status).toBe(404);
    // In its own workspace the missing key is what it is told.
    expect((await api("GET", "/api/themes/workspaces/default/settings", member)).status).toBe(403);
  });

  it("superadmin as a member role is refused with its reason; an empty list removes every role", async () => {
    const id = await user("ws-roles");
    expect((await asOperator("PUT", `/api/workspaces/default/members/${id}`)).status).toBe(201);
    const refused = await asOperator("PUT", `/api/workspaces/default/members/${id}/roles`, {
      roles: ["superadmin"],
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.json())).toMatch(/platform roles cannot be member roles/);
    expect(
      (await asOperator("PUT", `/api/workspaces/default/members/${id}/roles`, { roles: ["admin"] })).status,
    ).toBe(200);
    const cleared = await asOperator("PUT", `/api/workspaces/default/members/${id}/roles`, { roles: [] });
    expect(cleared.status).toBe(200);
    expect((await asOperator("GET", `/api/workspaces/default/members/${id}/roles`)).json()).toEqual({
      userId: id,
      roles: [],
    });
  });

  it("deleting a role revokes the sessions of those who hold it", async () => {
    expect((await asOperator("PUT", "/api/rbac/roles/auditors", { permissions: ["user.read"] })).status).toBe(
      201,
    );
    const id = await user("auditor-1");
    expect((await asOperator("PUT", `/api/rbac/users/${id}`, { role: "auditors" })).status).toBe(200);
    const session = await tokenOf("auditor-1");
    expect((await api("GET", "/api/users", session)).status).toBe(200);
    expect((await asOperator("DELETE", "/api/rbac/roles/auditors")).status).toBe(204);
    expect((await api("GET", "/api/users", session)).status).toBe(401);
  });

  it("an API key past BootstrapApiKeysExpireAtUtc is refused with 401", async () => {
    const answer = await api("GET", "/api/tenants", null, undefined, {
      headers: { "x-svc-api-key": EXPIRED_KEY },
    });
    expect(answer.status).toBe(401);
  });

  it("a 403 names every key a route accepts, and never names as missing a key the caller holds", async () => {
    const none = await mintToken({ scope: "workspace", workspaceKey: "default", permissions: ["job.read"] });
    const members = await api("GET", "/api/workspaces/default/members", none);
    expect(members.status).toBe(403);
    expect(members.json()).toMatchObject({ anyOf: ["membership.read", "workspace.read"] });
    expect(JSON.stringify(members.json())).toContain("workspace.read");
    const holder = await mintToken({
      scope: "workspace",
      workspaceKey: "default",
      permissions: ["user.create"],
    });
    const create = await api("POST", "/api/users", holder, {
      userName: "never",
      password: "long-enough-password",
    });
    expect(create.status).toBe(403);
    const problem = create.json<Record<string, unknown>>();
    expect(problem.requiredScope).toBe("platform");
    expect(problem.missingPermission).toBeUndefined();
  });

  it("the API description gives a job's status as its four states", async () => {
    const doc = (await http(`${base}/openapi.json`)).json<Record<string, unknown>>();
    const text = JSON.stringify(doc);
    for (const state of ["Pending", "Running", "Succeeded", "Failed"])
      expect(text).toContain(`"const":"${state}"`);
  });

  it("a rate limit of 0 turns its policy off (no 429, no RateLimit headers)", async () => {
    await user("limitless");
    for (let i = 0; i < 12; i++) {
      const answer = await signIn(base, { username: "limitless", password: "a wrong guess" });
      expect(answer.status).toBe(401);
      expect(answer.headers["ratelimit-policy"]).toBeUndefined();
    }
    expect((await login("limitless")).status).toBe(200);
  });

  it("the gateway warns once when X-Forwarded-For comes from a peer it does not trust", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logTo = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) };
    const other = (await h.start(gatewayService, { LOG_LEVEL: "warn" }, { logTo })).hooks
      .httpAddress as string;
    for (let i = 0; i < 3; i++) {
      await bearerApi(() => other)("GET", "/api/tenants", operator, undefined, {
        headers: { "x-forwarded-for": `203.0.113.${i}` },
      });
    }
    const warned = lines.filter((l) => String(l.msg).includes("BackendHost__TrustedProxies"));
    expect(warned).toHaveLength(1);
    expect(warned[0]?.peer).toBe("127.0.0.1");
  });

  it("workspace sign-in drops keys no route accepts from a workspace session (config.read)", async () => {
    expect(
      (await asOperator("PUT", "/api/rbac/roles/cfg-readers", { permissions: ["config.read", "job.read"] }))
        .status,
    ).toBe(201);
    const id = await user("cfg-reader");
    expect((await asOperator("PUT", `/api/workspaces/default/members/${id}`)).status).toBe(201);
    expect(
      (await asOperator("PUT", `/api/workspaces/default/members/${id}/roles`, { roles: ["cfg-readers"] }))
        .status,
    ).toBe(200);
    const session = claims(await tokenOf("cfg-reader", "default"));
    expect(session.permission).toEqual(["job.read"]);
  });
});
