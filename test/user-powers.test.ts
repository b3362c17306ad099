/**
 * No one changes a user more powerful than themselves. The attack: an operator whose
 * platform role holds only `user.read` and `user.update` set a superadmin's password and signed in as the
 * superadmin. Now a caller changes a user's password, e-mail, activation or existence only when it holds
 * every key that user holds; a superadmin is changed only by a superadmin.
 */
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
let base: string;
let operator: string;
const ids: Record<string, string> = {};

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);
const login = (username: string, password: string) => signIn(base, { username, password });

afterAll(() => h.stopAll());
beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__RateLimitAuthPerAccountPerMinute: "0",
  };
  await h.start(rbacService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  expect(
    (
      await asOperator("PUT", "/api/rbac/roles/helpdesk", {
        permissions: ["user.read", "user.update", "user.delete"],
      })
    ).status,
  ).toBe(201);
  for (const [name, role] of [
    ["boss", "superadmin"],
    ["plain", null],
  ] as const) {
    const created = await asOperator("POST", "/api/users", {
      userName: name,
      password: `${name}-long-password`,
    });
    expect(created.status, created.text).toBe(201);
    ids[name] = created.json<{ id: string }>().id;
    if (role !== null)
      expect((await asOperator("PUT", `/api/rbac/users/${ids[name]}`, { role })).status).toBe(200);
  }
});

describe("changing users", () => {
  it("a helpdesk operator cannot take over a superadmin: password, activation and deletion are refused", async () => {
    const helpdesk = await mintToken({
      scope: "platform",
      roles: ["helpdesk"],
      permissions: ["user.read", "user.update", "user.delete"],
    });
    const boss = ids.boss as string;
    for (const [method, path, body] of [
      ["PUT", `/api/users/${boss}`, { password: "taken-over-password" }],
      ["PUT", `/api/users/${boss}/activation?isActive=false`, undefined],
      ["DELETE", `/api/users/${boss}`, undefined],
    ] as const) {
      const refused = await api(method, path, helpdesk, body);
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(refused.json()).toMatchObject({ rule: "target-holds-more-rights" });
    }
    expect((await login("boss", "taken-over-password")).status).toBe(401);
    expect((await login("boss", "boss-long-password")).status).toBe(200);
  });

  it("a user holding no more than the caller can be changed; a superadmin changes anyone", async () => {
    const helpdesk = await mintToken({
      scope: "platform",
      roles: ["helpdesk"],
      permissions: ["user.read", "user.update"],
    });
    expect((await api("PUT", `/api/users/${ids.plain}`, helpdesk, { displayName: "Plain" })).status).toBe(
      200,
    );
    expect((await asOperator("PUT", `/api/users/${ids.boss}`, { displayName: "Boss" })).status).toBe(200);
  });
});

describe("granting roles", () => {
  it("a holder of role.update alone cannot make itself superadmin or write itself a role of every key", async () => {
    // A real user signed in with a platform role of the role keys only.
    expect(
      (await asOperator("PUT", "/api/rbac/roles/role-keeper", { permissions: ["role.read", "role.update"] }))
        .status,
    ).toBe(201);
    const created = await asOperator("POST", "/api/users", {
      userName: "keeper",
      password: "keeper-long-password",
    });
    const keeperId = created.json<{ id: string }>().id;
    expect((await asOperator("PUT", `/api/rbac/users/${keeperId}`, { role: "role-keeper" })).status).toBe(
      200,
    );
    const keeper = (await login("keeper", "keeper-long-password")).json<{ accessToken: string }>()
      .accessToken;
    const asKeeper = (method: string, path: string, body?: unknown) => api(method, path, keeper, body);

    const refused = await asKeeper("PUT", `/api/rbac/users/${keeperId}`, { role: "superadmin" });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.json()).toMatchObject({ rule: "grant-exceeds-own-rights" });
    expect((await asKeeper("PUT", "/api/rbac/roles/everything", { permissions: ["*"] })).status).toBe(403);
    expect((await asKeeper("PUT", "/api/rbac/roles/role-keeper", { permissions: ["*"] })).status).toBe(403);
    // Nor demotes the superadmin.
    expect((await asKeeper("DELETE", `/api/rbac/users/${ids.boss}`)).status).toBe(403);
    // What it holds, it may grant.
    expect(
      (await asKeeper("PUT", "/api/rbac/roles/role-reader", { permissions: ["role.read"] })).status,
    ).toBe(201);
    expect((await asKeeper("PUT", `/api/rbac/users/${ids.plain}`, { role: "role-reader" })).status).toBe(200);
    const assignments = await asOperator("GET", "/api/rbac/users?limit=100");
    const roleOf = (id: string | undefined) =>
      assignments
        .json<{ items: Array<{ userId: string; role: string | null }> }>()
        .items.find((a) => a.userId === id)?.role;
    expect([roleOf(keeperId), roleOf(ids.boss), roleOf(ids.plain)]).toEqual([
      "role-keeper",
      "superadmin",
      "role-reader",
    ]);
  });
});
