/**
 * While NATS is down, forwarded routes fail at once (503 with Retry-After) and
 * public resolution serves the last known answer for a bounded time; after a NATS restart, every service provisions again what it needs (the events stream,
 * KV buckets, the dispatcher's consumer, and the watches on them) with no restart of its own. The test
 * runs its own nats-server on a free port and restarts it with an empty store, the worst case: a memory
 * bucket (the rate limits, which sign-in needs) is lost on every restart, file-backed ones when the store
 * is lost.
 */

import { connectNats, createEventPublisher, EventSource } from "@svc/bus";
import { createLogger } from "@svc/observability";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, http } from "./support/http.js";
import { OwnNatsServer } from "./support/nats-server.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness({ seed: true });
const nats = new OwnNatsServer();
const receiver = new Receiver();

afterAll(async () => {
  await h.stopAll();
  await nats.dispose();
  await receiver.stop();
});

describe("a NATS outage fails fast", () => {
  it("answers forwarded routes 503 at once with Retry-After, and serves known resolutions past their lifetime", async () => {
    await nats.start();
    const env = {
      NATS_URL: nats.url,
      BackendHost__ResolveCacheTtlMs: "200",
      BackendHost__ResolveStaleMs: "60000",
      BackendHost__RateLimitAuthPerMinute: "1000",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    };
    await h.start(resolverService, env);
    await h.start(rbacService, env);
    const base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    const resolve = (host: string) => http(`${base}/workspace/public/resolve`, { headers: { host } });
    const operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
    const api = bearerApi(() => base);
    const roles = () => api("GET", "/api/rbac/roles", operator);
    expect((await resolve("localhost")).json()).toEqual({ resolved: true, workspaceKey: "default" });
    expect((await roles()).status).toBe(200);

    await nats.kill();
    // The gateway's client noticed (an operator route answers 503), and the cached resolution is past its
    // 200 ms lifetime.
    await until(async () => (await roles()).status === 503, 10_000, 50);
    await new Promise((r) => setTimeout(r, 250));

    for (const call of [
      roles,
      () => api("POST", "/api/auth/login", null, { username: "admin", password: "x" }),
      () => resolve("unknown.example"),
    ]) {
      const started = Date.now();
      const answer = await call();
      const elapsed = Date.now() - started;
      expect(answer.status).toBe(503);
      expect(answer.headers["retry-after"]).toBe("5");
      expect(answer.json()).toMatchObject({ code: "SVC_SERVICE_UNAVAILABLE" });
      // Not the 5 s request timeout: no wait at all (loose bound for a loaded machine).
      expect(elapsed).toBeLessThan(1_000);
    }
    // The last known resolution, past its lifetime, within the stale window.
    expect((await resolve("localhost")).json()).toEqual({ resolved: true, workspaceKey: "default" });

    await nats.start();
    await until(async () => (await roles()).status === 200, 15_000, 100);
    await h.stopAll();
    await nats.kill();
  }, 60_000);
});

describe("recovery after a NATS restart", () => {
  it("sign-in, revocation watch, the events stream and webhook delivery work again with no service restart", async () => {
    await nats.start();
    await receiver.start();
    const env = {
      NATS_URL: nats.url,
      BackendHost__RateLimitAuthPerMinute: "1000",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__JobPollIntervalMs: "100",
    };
    await h.start(rbacService, env);
    await h.start(webhookDispatcherService, env);
    const base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    const api = bearerApi(() => base);
    const login = () =>
      api("POST", "/api/auth/login", null, { username: "admin", password: "admin-dev-password" });
    await h.sql(
      `INSERT INTO rbac.users (id, user_name, display_name, password_hash, global_role)
       VALUES (gen_random_uuid(), 'admin', 'a', $1, 'superadmin')`,
      [await (await import("@svc/service-rbac")).hashPassword("admin-dev-password")],
    );
    expect((await login()).status).toBe(200);
    const operator = await mintToken({ scope: "platform", permissions: ["webhook.manage"] });
    const created = await api("POST", "/api/webhooks", operator, {
      eventName: "user.created",
      targetUrl: receiver.url,
      secret: "s",
    });
    expect(created.status).toBe(201);

    // The server dies and comes back with an empty store.
    await nats.kill();
    await nats.start();
    const back = Date.now();
    await until(async () => (await login()).status === 200, 20_000, 100);
    const signInAfterMs = Date.now() - back;
    // Target: within 5 s of NATS returning (the bound here is loose for a loaded machine).
    expect(signInAfterMs).toBeLessThan(15_000);

    // Events flow again: the stream and the dispatcher's consumer were made anew.
    const nc = await connectNats({ url: env.NATS_URL, name: "t", logger: createLogger("t", "silent") });
    const events = createEventPublisher(nc, h.env.SVC_SUBJECT_PREFIX as string, EventSource.Platform);
    await until(
      async () => {
        await events
          .publish("user.created", null, { n: 1 }, { eventId: "after-restart" })
          .catch(() => undefined);
        return receiver.received.length > 0;
      },
      20_000,
      500,
    );
    expect(JSON.parse(receiver.received[0]?.body ?? "{}").data).toEqual({ n: 1 });
    await nc.close();
    console.log(`sign-in answered 200 again ${signInAfterMs} ms after NATS returned`);
  }, 90_000);
});

describe("revocations survive a NATS store loss", () => {
  it("a session revoked before NATS lost its store stays refused by a gateway started after it", async () => {
    await h.stopAll();
    await nats.kill();
    await nats.start();
    const env = {
      NATS_URL: nats.url,
      BackendHost__RateLimitAuthPerMinute: "1000",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    };
    await h.start(rbacService, env);
    let gateway = await h.start(gatewayService, env);
    let base = gateway.hooks.httpAddress as string;
    const userId = (
      await h.sql<{ id: string }>(
        `INSERT INTO rbac.users (id, user_name, display_name, password_hash, global_role)
         VALUES (gen_random_uuid(), 'revoked-22', 'r', $1, 'superadmin') RETURNING id::text`,
        [await (await import("@svc/service-rbac")).hashPassword("the first long password")],
      )
    )[0]?.id as string;
    const api = bearerApi(() => base);
    const signIn = await api("POST", "/api/auth/login", null, {
      username: "revoked-22",
      password: "the first long password",
    });
    expect(signIn.status).toBe(200);
    const token = signIn.json<{ accessToken: string }>().accessToken;
    const roles = (at: string) => bearerApi(() => at)("GET", "/api/rbac/roles", token);
    expect((await roles(base)).status).toBe(200);
    // A password change revokes the session.
    const operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
    const changed = await api("PUT", `/api/users/${userId}`, operator, {
      password: "the second long password",
    });
    expect(changed.status, changed.text).toBe(200);
    await until(async () => (await roles(base)).status === 401, 5_000, 50);

    // NATS loses its store; the gateway is restarted after it (its memory of revocations is gone too).
    await gateway.stop();
    await nats.kill();
    await nats.start();
    gateway = await h.start(gatewayService, env);
    base = gateway.hooks.httpAddress as string;
    // Until rbac has filled the bucket again the gateway trusts no token (503); then the session is 401.
    const answers = new Set<number>();
    await until(
      async () => {
        const status = (await roles(base)).status;
        answers.add(status);
        return status !== 503;
      },
      20_000,
      100,
    );
    expect((await roles(base)).status).toBe(401);
    expect([...answers].filter((s) => s !== 503 && s !== 401)).toEqual([]);
  }, 60_000);
});
