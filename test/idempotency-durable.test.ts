/**
 * An `Idempotency-Key` makes a retry safe after any fault. The owning service keeps the
 * outcome of a keyed write in the transaction of its change, so a retry replays it even when the first
 * answer was lost after the commit (a 504: here NATS hangs between the commit and the reply) or when NATS
 * lost the gateway's key store (a restart with an empty store). Before, the retry ran again: a second
 * webhook subscription, and 409 "user name is taken" instead of the replayed 201. And a request whose
 * database connection is terminated under it answers 503 (retry), not 500.
 */
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { OwnNatsServer } from "./support/nats-server.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const nats = new OwnNatsServer();
let base: string;
let operator: string;

beforeAll(async () => {
  await nats.start();
  const env = {
    NATS_URL: nats.url,
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
    BackendHost__RequestTimeoutMs: "3000",
  };
  await h.start(rbacService, env);
  await h.start(webhookDispatcherService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"], sub: "op-durable" });
});
afterAll(async () => {
  await h.stopAll();
  await nats.dispose();
});

const api = bearerApi(() => base);
const post = (path: string, body: unknown, key: string) =>
  api("POST", path, operator, body, { headers: { "idempotency-key": key } });

const count = async (text: string, values: unknown[]) => (await h.sql<{ n: number }>(text, values))[0]?.n;

describe("a keyed write's outcome is kept with its change", () => {
  it("replays a write committed just before its 504 instead of running it again", async () => {
    const target = "http://127.0.0.1:9/durable-hook";
    const subscriptions = () =>
      count("SELECT count(*)::int AS n FROM webhook_dispatcher.subscriptions WHERE target_url = $1", [
        target,
      ]);
    const body = { eventName: "user.created", targetUrl: target, secret: "s3cret-value" };
    // The dispatcher's insert waits on a lock the test holds.
    const locker = new pg.Client({ connectionString: h.db.url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE webhook_dispatcher.subscriptions IN SHARE ROW EXCLUSIVE MODE");
      const started = Date.now();
      const first = post("/api/webhooks", body, "hook-after-commit");
      await until(
        async () =>
          (await count(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
            [],
          )) === 1,
        5_000,
        20,
      );
      // NATS hangs: the dispatcher commits once the lock is gone, but its answer does not reach the gateway.
      nats.pause();
      await locker.query("COMMIT");
      await until(async () => (await subscriptions()) === 1, 2_000, 20);
      // The gateway gives up at the request's deadline while NATS still hangs: a 504.
      const answer = await first;
      expect(answer.status).toBe(504);
      expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
      nats.resume();
      const committed = await h.sql<{ id: string }>(
        "SELECT id::text FROM webhook_dispatcher.subscriptions WHERE target_url = $1",
        [target],
      );
      // The retry gets the first request's answer: the subscription it made.
      const retry = await post("/api/webhooks", body, "hook-after-commit");
      expect(retry.status).toBe(201);
      expect(retry.headers["idempotency-replayed"]).toBe("true");
      expect(retry.json<{ id: string }>().id).toBe(committed[0]?.id);
      expect(await subscriptions()).toBe(1);
    } finally {
      await locker.end();
    }
  }, 30_000);

  it("replays answers after NATS restarted with an empty store (the gateway's keys are gone)", async () => {
    const body = { userName: "durable-user", password: "long-enough-password" };
    const first = await post("/api/users", body, "user-before-loss");
    expect(first.status).toBe(201);
    const taken = await post("/api/users", body, "conflict-before-loss");
    expect(taken.status).toBe(409);

    await nats.kill();
    await nats.start();
    // Every service provisions its buckets and streams again on its own.
    await until(async () => (await post("/api/users", body, "probe-after-loss")).status === 409, 20_000, 250);

    const retry = await post("/api/users", body, "user-before-loss");
    expect(retry.status).toBe(201);
    expect(retry.headers["idempotency-replayed"]).toBe("true");
    expect(retry.json()).toEqual(first.json());
    expect(
      await count("SELECT count(*)::int AS n FROM rbac.users WHERE user_name = $1", [body.userName]),
    ).toBe(1);
    // A kept error answer is given again too, and the key still belongs to its first request.
    const conflict = await post("/api/users", body, "conflict-before-loss");
    expect(conflict.status).toBe(409);
    expect(conflict.json()).toMatchObject({ code: "SVC_CONFLICT" });
    const other = await post("/api/users", { ...body, userName: "durable-other" }, "user-before-loss");
    expect(other.status).toBe(422);
    expect(other.json()).toMatchObject({ code: "SVC_IDEMPOTENCY_KEY_REUSED" });
    expect(
      await count("SELECT count(*)::int AS n FROM rbac.users WHERE user_name = $1", ["durable-other"]),
    ).toBe(0);
  }, 60_000);

  it("answers 503 (retry), not 500, when the service's database connection is terminated under the request", async () => {
    const locker = new pg.Client({ connectionString: h.db.url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("LOCK TABLE rbac.users IN SHARE ROW EXCLUSIVE MODE");
      const body = { userName: "cut-off-user", password: "long-enough-password" };
      const answer = post("/api/users", body, "cut-off-key");
      const waiting = async () =>
        h.sql<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        );
      await until(async () => (await waiting()).length === 1, 5_000, 20);
      await h.sql("SELECT pg_terminate_backend($1)", [(await waiting())[0]?.pid]);
      const cut = await answer;
      expect(cut.status, cut.text).toBe(503);
      expect(cut.headers["retry-after"]).toBe("5");
      expect(cut.json()).toMatchObject({ code: "SVC_SERVICE_UNAVAILABLE", service: "database" });
      // The keyed unit of work was rolled back as a whole: the retry with the key runs, once.
      await locker.query("COMMIT");
      const retry = await post("/api/users", body, "cut-off-key");
      expect(retry.status, retry.text).toBe(201);
      expect(
        await count("SELECT count(*)::int AS n FROM rbac.users WHERE user_name = $1", [body.userName]),
      ).toBe(1);
    } finally {
      await locker.end();
    }
  });
});
