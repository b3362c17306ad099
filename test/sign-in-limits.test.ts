/**
 * Sign-in was limited per IP address only, and every IPv6 address counted on its own. Now
 * sign-in attempts are counted per account too (from any address), and IPv6 clients by their /64.
 */
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { inOneRateWindow } from "./support/wait.js";

const h = await createHarness();
let base: string;
let operator: string;

const api = bearerApi(() => base);
const login = (username: string, password: string, from: string) =>
  signIn(base, { username, password }, { "x-forwarded-for": from });

afterAll(() => h.stopAll());
beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "3",
    BackendHost__RateLimitAuthPerMinute: "1000",
    BackendHost__RateLimitAuthPerAccountPerMinute: "3",
    BackendHost__TrustedProxies__0: "127.0.0.1",
  };
  await h.start(rbacService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  for (const userName of ["target", "bystander"]) {
    const created = await api("POST", "/api/users", operator, {
      userName,
      password: `${userName}-long-password`,
    });
    expect(created.status, created.text).toBe(201);
  }
});

describe("sign-in limits", () => {
  beforeEach(() => inOneRateWindow());
  it("limits attempts per account, whatever address they come from", async () => {
    for (let i = 1; i <= 3; i++) {
      expect((await login("target", "a wrong guess", `198.51.100.${i}`)).status).toBe(401);
    }
    // A fourth address, even with the right password (and the name in another case): refused this minute.
    const refused = await login("TARGET", "target-long-password", "198.51.100.4");
    expect(refused.status).toBe(429);
    expect(refused.json()).toMatchObject({ policy: "account" });
    expect(refused.headers["retry-after"]).toBe("60");
    // Another account is not held back.
    expect((await login("bystander", "bystander-long-password", "198.51.100.4")).status).toBe(200);
  });

  it("counts IPv6 clients by their /64", async () => {
    const from = (address: string) =>
      api("GET", "/api/users", operator, undefined, { headers: { "x-forwarded-for": address } });
    for (const host of ["1", "2", "3"]) expect((await from(`2001:db8:1:2::${host}`)).status).toBe(200);
    // Another address of the same /64 is the same client.
    expect((await from("2001:db8:1:2:ffff::9")).status).toBe(429);
    // Another /64 is another client.
    expect((await from("2001:db8:1:3::1")).status).toBe(200);
  });

  it("counts sign-out against the api policy: a flood of made-up tokens is refused before any is verified", async () => {
    const logout = () =>
      api("POST", "/api/auth/logout", "not.a.token", undefined, {
        headers: { "x-forwarded-for": "203.0.113.9" },
      });
    for (let i = 0; i < 3; i++) {
      const refused = await logout();
      expect(refused.status).toBe(401);
      expect(refused.headers["ratelimit-policy"]).toMatch(/^"api";/);
    }
    expect((await logout()).status).toBe(429);
  });
});
