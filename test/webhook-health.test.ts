/**
 * Endpoint health: a subscription every delivery of which has failed for longer than
 * BackendHost:WebhookDisableAfterFailingSeconds is turned off, once, and webhook.disabled says why; one
 * delivery that goes through makes it healthy again, and turning it on again starts a new period.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { EventPublisher } from "@svc/bus";
import { createDb, type Db, sql } from "@svc/db";
import { runPendingJobsNow } from "@svc/jobs";
import type { RunningService } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { platformPublisher } from "./support/publisher.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const db: Db = createDb({
  databaseUrl: h.db.url,
  maximumPoolSize: 2,
  applicationName: "webhook-health-test",
});
const failing = new Receiver();
const watcher = new Receiver();
let base = "";
let operator = "";
let nc: NatsConnection;
let events: EventPublisher;
let dispatcher: RunningService;
const api = bearerApi(() => base);

/** Failing for one second is too long here. */
const env = {
  BackendHost__RateLimitApiPerMinute: "0",
  BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  BackendHost__JobPollIntervalMs: "100",
  BackendHost__WebhookDisableAfterFailingSeconds: "1",
  BackendHost__WebhookCircuitFailureThreshold: "1000",
};

const subscription = async (id: string) =>
  db.one<{ is_active: boolean; failing_since: Date | null; disabled_reason: string | null }>(sql`
    SELECT is_active, failing_since, disabled_reason FROM webhook_dispatcher.subscriptions WHERE id = ${id}`);
/** Makes the waiting retries due now: the schedule itself is the job engine's tests' business. */
const hurry = () => runPendingJobsNow(db);

beforeAll(async () => {
  await failing.start();
  await watcher.start();
  await h.start(rbacService, env);
  dispatcher = await h.start(webhookDispatcherService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", permissions: ["webhook.read", "webhook.manage"] });
  ({ nc, events } = await platformPublisher(h));
});

afterAll(async () => {
  await h.stopAll();
  await nc.close();
  await db.end();
  await failing.stop();
  await watcher.stop();
});

describe("endpoint health", () => {
  it("turns off a subscription that failed every delivery for too long, says why once, and starts anew when turned on", async () => {
    const sub = (
      await api("POST", "/api/webhooks", operator, {
        eventName: "user.updated",
        targetUrl: failing.url,
        secret: "health-secret",
      })
    ).json<{ id: string }>();
    const told = await api("POST", "/api/webhooks", operator, {
      eventName: "webhook.disabled",
      targetUrl: watcher.url,
      secret: "watcher-secret",
    });
    expect(told.status).toBe(201);

    // One failure then one success: healthy again.
    failing.respond = () => ({ status: 500 });
    await events.publish("user.updated", null, { n: 1 });
    await until(async () => (await subscription(sub.id)).failing_since !== null, 15_000);
    failing.respond = () => ({ status: 200 });
    // The failed attempt's retry may be written back just after failing_since: made due until it runs.
    await until(async () => {
      await hurry();
      return (await subscription(sub.id)).failing_since === null;
    }, 15_000);

    // Failing from now on; a failure past the period turns it off.
    failing.respond = () => ({ status: 503 });
    await events.publish("user.updated", null, { n: 2 });
    await until(async () => (await subscription(sub.id)).failing_since !== null, 15_000);
    const since = (await subscription(sub.id)).failing_since as Date;
    expect((await subscription(sub.id)).is_active).toBe(true);
    await until(async () => Date.now() - since.getTime() > 1_000, 5_000, 50);
    await until(async () => {
      await hurry();
      return !(await subscription(sub.id)).is_active;
    }, 15_000);
    expect((await subscription(sub.id)).disabled_reason).toMatch(/^every delivery failed for [\d.]+ hours$/);

    // The operators' event, once, with the reason.
    await watcher.waitFor(1, 15_000);
    const event = JSON.parse(watcher.received[0]?.body ?? "{}") as { data: Record<string, unknown> };
    expect(event.data).toMatchObject({
      subscriptionId: sub.id,
      reason: expect.stringMatching(/^every delivery failed/),
    });
    // Events while it is off make no delivery; it stays off until an operator turns it on.
    await events.publish("user.updated", null, { n: 3 });
    const listed = (await api("GET", "/api/webhooks", operator)).json<{
      items: Array<{ id: string; isActive: boolean }>;
    }>();
    expect(listed.items.find((s) => s.id === sub.id)?.isActive).toBe(false);

    // Turned on again: healthy, a new period from its next failure.
    expect((await api("PUT", `/api/webhooks/${sub.id}/activation?isActive=true`, operator)).status).toBe(200);
    expect(await subscription(sub.id)).toMatchObject({ is_active: true, failing_since: null });
    await events.publish("user.updated", null, { n: 4 });
    await until(async () => (await subscription(sub.id)).failing_since !== null, 15_000);
    expect((await subscription(sub.id)).is_active).toBe(true);
    expect(watcher.received).toHaveLength(1);
  });

  it("turns off a subscription whose last N attempts failed (BackendHost:WebhookDisableAfterFailures), a success resetting the count", async () => {
    // A dispatcher that counts: three failed attempts in a row, and no period.
    await dispatcher.stop();
    dispatcher = await h.start(webhookDispatcherService, {
      ...env,
      BackendHost__WebhookDisableAfterFailingSeconds: "0",
      BackendHost__WebhookDisableAfterFailures: "3",
    });
    const counted = async (id: string) =>
      db.one<{ is_active: boolean; failing_attempts: number; disabled_reason: string | null }>(sql`
        SELECT is_active, failing_attempts, disabled_reason FROM webhook_dispatcher.subscriptions
        WHERE id = ${id}`);
    const sub = (
      await api("POST", "/api/webhooks", operator, {
        eventName: "user.deleted",
        targetUrl: failing.url,
        secret: "count-secret",
      })
    ).json<{ id: string }>();
    // Two failed attempts, then one that goes through: the count starts again.
    failing.respond = () => ({ status: 500 });
    await events.publish("user.deleted", null, { n: 1 });
    await until(async () => (await counted(sub.id)).failing_attempts === 1, 15_000);
    // The retry may be written back just after the count: made due until it has run.
    await until(async () => {
      await hurry();
      return (await counted(sub.id)).failing_attempts === 2;
    }, 15_000);
    failing.respond = () => ({ status: 200 });
    await until(async () => {
      await hurry();
      return (await counted(sub.id)).failing_attempts === 0;
    }, 15_000);
    expect((await counted(sub.id)).is_active).toBe(true);
    // Three in a row: off, with the reason.
    failing.respond = () => ({ status: 500 });
    await events.publish("user.deleted", null, { n: 2 });
    await until(async () => {
      await hurry();
      return !(await counted(sub.id)).is_active;
    }, 20_000);
    expect(await counted(sub.id)).toMatchObject({
      failing_attempts: 3,
      disabled_reason: "the last 3 delivery attempts failed",
    });
  });
});
