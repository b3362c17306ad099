/**
 * What must hold across gateway replicas: a revoked session is refused by every replica within a
 * second, and rate limits count across replicas (429 with Retry-After: 60); X-Forwarded-For is believed
 * only from trusted proxies.
 */
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

// Internal: the shared counter's key, to wait for what the replicas wrote.
import { rateLimitKey } from "../services/gateway/src/auth/rate-limiter.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, type HttpResponse, signIn } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { inOneRateWindow, until } from "./support/wait.js";

const h = await createHarness();
let operator: string;

/** The operator API of the replica at `base`. */
const at = (base: string) => bearerApi(() => base);

beforeAll(async () => {
  await h.start(rbacService);
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});
afterAll(() => h.stopAll());

async function waitForStatus(check: () => Promise<number>, status: number, withinMs: number) {
  const started = Date.now();
  for (;;) {
    if ((await check()) === status) return Date.now() - started;
    if (Date.now() - started > withinMs) throw new Error(`not ${status} within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until the shared api counter of this client in `window` holds at least `hits` (the replicas have
 * written what they admitted), then one sync interval more for the watchers: no fixed sleep that a busy
 * machine could outrun.
 */
async function waitForSharedApiHits(window: number, hits: number) {
  const nc = await connect(h.natsOptions());
  try {
    const kv = await new Kvm(nc).open(`${h.env.SVC_SUBJECT_PREFIX}_rate_limits`);
    const key = rateLimitKey("api", window, "127.0.0.1");
    await until(async () => Number((await kv.get(key))?.string() ?? 0) >= hits, 10_000, 20);
  } finally {
    await nc.close();
  }
  await new Promise((r) => setTimeout(r, 200));
}

describe("session revocation across two gateways", () => {
  it("changing a role revokes its holders' sessions on every replica within a second", async () => {
    const env = {
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__RateLimitAuthPerMinute: "0",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    };
    const a = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    const b = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    expect(
      (await at(a)("PUT", "/api/rbac/roles/auditor", operator, { permissions: ["role.read"] })).status,
    ).toBe(201);
    const dave = (
      await at(a)("POST", "/api/users", operator, { userName: "dave", password: "dave's long password" })
    ).json<{ id: string }>();
    expect((await at(a)("PUT", `/api/rbac/users/${dave.id}`, operator, { role: "auditor" })).status).toBe(
      200,
    );
    const token = (await signIn(b, { username: "dave", password: "dave's long password" })).json<{
      accessToken: string;
    }>().accessToken;
    expect((await at(a)("GET", "/api/rbac/roles", token)).status).toBe(200);
    expect((await at(b)("GET", "/api/rbac/roles", token)).status).toBe(200);

    const changedAt = Date.now();
    expect(
      (await at(a)("PUT", "/api/rbac/roles/auditor", operator, { permissions: ["role.read", "job.read"] }))
        .status,
    ).toBe(200);
    const [onA, onB] = await Promise.all([
      waitForStatus(async () => (await at(a)("GET", "/api/rbac/roles", token)).status, 401, 5_000),
      waitForStatus(async () => (await at(b)("GET", "/api/rbac/roles", token)).status, 401, 5_000),
    ]);
    // Pushed to every replica (the token itself is valid for an hour). Typically tens of milliseconds; the
    // bound is loose so that a loaded machine cannot fail it.
    expect(Math.max(onA, onB)).toBeLessThan(5_000);
    expect(Date.now() - changedAt).toBeLessThan(6_000);

    // A new sign-in gets a working token with the new grants; deleting the role revokes it too.
    const fresh = (await signIn(a, { username: "dave", password: "dave's long password" })).json<{
      accessToken: string;
    }>().accessToken;
    expect((await at(b)("GET", "/api/rbac/roles", fresh)).status).toBe(200);
    expect((await at(a)("DELETE", "/api/rbac/roles/auditor", operator)).status).toBe(204);
    await waitForStatus(async () => (await at(b)("GET", "/api/rbac/roles", fresh)).status, 401, 5_000);
  });
});

describe("rate limits across two gateways", () => {
  // Each test below waits for a window of its own where its gateways are up (the first two need 15 s).
  beforeEach(() => inOneRateWindow());
  it("the api policy counts one client's requests on both replicas, answering 429 with Retry-After: 60", async () => {
    const env = {
      BackendHost__RateLimitApiPerMinute: "10",
      SVC_SUBJECT_PREFIX: h.env.SVC_SUBJECT_PREFIX as string,
    };
    const a = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    const b = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    // The counts live in one-minute windows: start in a fresh one unless 15 s of this one are left, so
    // that a slow (loaded) machine cannot see the window roll over mid-test.
    await inOneRateWindow(15_000);
    const window = Math.floor(Date.now() / 60_000);
    const statuses: number[] = [];
    // Each answer under the limit says the policy and what is left of it.
    const remaining: number[] = [];
    const seen = (response: HttpResponse) => {
      statuses.push(response.status);
      expect(response.headers["ratelimit-policy"]).toBe('"api";q=10;w=60');
      const m = /^"api";r=(\d+);t=(\d+)$/.exec(String(response.headers.ratelimit));
      expect(m, String(response.headers.ratelimit)).not.toBeNull();
      expect(Number(m?.[2])).toBeGreaterThanOrEqual(1);
      expect(Number(m?.[2])).toBeLessThanOrEqual(60);
      remaining.push(Number(m?.[1]));
    };
    for (let i = 0; i < 6; i++) seen(await at(a)("GET", "/api/rbac/roles", operator));
    // Counted down by A's own hits (approximate by design: for a moment around a shared write the same
    // hits may count twice, which errs on the strict side).
    expect(remaining[0]).toBe(9);
    expect(remaining).toEqual([...remaining].sort((x, y) => y - x));
    expect(remaining[5]).toBeLessThanOrEqual(4);
    await waitForSharedApiHits(window, 6);
    for (let i = 0; i < 6; i++) seen(await at(b)("GET", "/api/rbac/roles", operator));
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.slice(-2)).toEqual([429, 429]);
    // B counts down from where A stopped once its watch has delivered A's hits (its first answer may
    // still show only its own: the count is approximate across replicas, as the limit is), to 0.
    const onB = remaining.slice(6);
    expect(onB.slice(-3)).toEqual([0, 0, 0]);
    expect(onB).toEqual([...onB].sort((x, y) => y - x));
    // A has seen B's hits once they are written (within a sync interval).
    await waitForSharedApiHits(window, 10);
    const limited = await at(a)("GET", "/api/rbac/roles", operator);
    expect(limited.status).toBe(429);
    expect(limited.headers["retry-after"]).toBe("60");
    expect(limited.headers["ratelimit-policy"]).toBe('"api";q=10;w=60');
    expect(String(limited.headers.ratelimit)).toMatch(/^"api";r=0;t=\d+$/);
    expect(limited.json()).toMatchObject({ status: 429, code: "SVC_RATE_LIMITED" });
  }, 90_000);

  it("the auth policy counts sign-in attempts exactly across replicas", async () => {
    const env = { BackendHost__RateLimitAuthPerMinute: "5" };
    const a = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    const b = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    await inOneRateWindow(15_000);
    // A distinct client per test, through a trusted proxy.
    const from = { "x-forwarded-for": "198.51.100.7" };
    const attempt = (base: string) => signIn(base, { username: "nobody", password: "wrong" }, from);
    const statuses = [];
    const left = [];
    for (const base of [a, b, a, b, a, b, a]) {
      const answer = await attempt(base);
      statuses.push(answer.status);
      expect(answer.headers["ratelimit-policy"]).toBe('"auth";q=5;w=60');
      left.push(/;r=(\d+);/.exec(String(answer.headers.ratelimit))?.[1]);
    }
    // The gateways do not trust 127.0.0.1 as a proxy here, so all attempts count for 127.0.0.1.
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
    // Counted exactly: each replica's answer says what is left across both.
    expect(left).toEqual(["4", "3", "2", "1", "0", "0", "0"]);
  }, 90_000);

  it("believes X-Forwarded-For only from a trusted proxy", async () => {
    const trusted = (
      await h.start(gatewayService, {
        BackendHost__RateLimitApiPerMinute: "2",
        BackendHost__TrustedProxies__0: "127.0.0.1",
        SVC_SUBJECT_PREFIX: `${h.env.SVC_SUBJECT_PREFIX}xf`,
      })
    ).hooks.httpAddress as string;
    // The proxy (127.0.0.1, trusted) appended the client's address; anything before it is the client's.
    const as = (ip: string) => ({ headers: { "x-forwarded-for": `198.51.100.99, ${ip}` } });
    const t = [];
    for (const ip of ["203.0.113.1", "203.0.113.1", "203.0.113.1", "203.0.113.2"])
      t.push((await at(trusted)("GET", "/api/rbac/roles", operator, undefined, as(ip))).status);
    // Clients are told apart by their forwarded address (no rbac on this prefix: 503 once admitted).
    expect(t).toEqual([503, 503, 429, 503]);

    const untrusted = (
      await h.start(gatewayService, {
        BackendHost__RateLimitApiPerMinute: "2",
        SVC_SUBJECT_PREFIX: `${h.env.SVC_SUBJECT_PREFIX}xu`,
      })
    ).hooks.httpAddress as string;
    const u = [];
    for (const ip of ["203.0.113.1", "203.0.113.2", "203.0.113.3"])
      u.push((await at(untrusted)("GET", "/api/rbac/roles", operator, undefined, as(ip))).status);
    // A forged header from an untrusted peer changes nothing: all three count for the same client.
    expect(u).toEqual([503, 503, 429]);
  });
});

describe("when the limiter's store is unreachable", () => {
  beforeEach(() => inOneRateWindow());
  it("sign-in fails closed with a 503 problem, while the API keeps answering", async () => {
    const prefix = `${h.env.SVC_SUBJECT_PREFIX}lc`;
    await h.start(rbacService, { SVC_SUBJECT_PREFIX: prefix });
    const base = (await h.start(gatewayService, { SVC_SUBJECT_PREFIX: prefix })).hooks.httpAddress as string;
    // The shared counters disappear from under the running gateway.
    const { connect } = await import("@nats-io/transport-node");
    const { jetstreamManager } = await import("@nats-io/jetstream");
    const nc = await connect(h.natsOptions());
    try {
      await (await jetstreamManager(nc)).streams.delete(`KV_${prefix}_rate_limits`);
    } finally {
      await nc.close();
    }
    const login = await signIn(base, { username: "nobody", password: "wrong" });
    expect(login.status).toBe(503);
    expect(login.json()).toMatchObject({ status: 503, code: "SVC_SERVICE_UNAVAILABLE" });
    // The api policy counts per replica meanwhile (fails open): operators are not locked out.
    expect((await at(base)("GET", "/api/rbac/roles", operator)).status).toBe(200);
  });
});
