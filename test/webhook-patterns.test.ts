/**
 * Subscription patterns (ADR 0014). What a subscription reports is what it receives: a
 * trailing `*` is a prefix wildcard for delivery as for `matchesKnownEvent` (a `workspace.*` subscription
 * showed `matchesKnownEvent: true` and never received `workspace.created`). And no delivery loop: the dead
 * letter of a delivery to subscription S is never delivered to S, and a failed delivery of such an event
 * is not announced again, so several failing `*` subscriptions cannot feed each other without end.
 */
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
let base: string;
let operator: string;
const receivers: Receiver[] = [];
const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
    BackendHost__JobPollIntervalMs: "100",
    BackendHost__JobReaperIntervalMs: "200",
  };
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(webhookDispatcherService, env);
  await h.start(jobReaperService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});
afterAll(async () => {
  await h.stopAll();
  for (const r of receivers) await r.stop();
});

async function subscribed(
  eventName: string,
): Promise<{ id: string; receiver: Receiver; matchesKnownEvent: boolean }> {
  const receiver = new Receiver();
  await receiver.start();
  receivers.push(receiver);
  const created = await asOperator("POST", "/api/webhooks", {
    eventName,
    targetUrl: receiver.url,
    secret: "s3cret-value",
  });
  expect(created.status, created.text).toBe(201);
  return { ...created.json<{ id: string; matchesKnownEvent: boolean }>(), receiver };
}

const eventsOf = (r: Receiver) => r.received.map((x) => String(x.headers["x-svc-event"]));

describe("a trailing * is a prefix wildcard, for delivery as for reporting", () => {
  it("workspace.* and workspace.create* receive workspace.created; a * elsewhere is refused", async () => {
    const prefix = await subscribed("workspace.*");
    const narrower = await subscribed("workspace.create*");
    const unrelated = await subscribed("workspaces.*");
    expect([prefix.matchesKnownEvent, narrower.matchesKnownEvent, unrelated.matchesKnownEvent]).toEqual([
      true,
      true,
      false,
    ]);
    expect(
      (await asOperator("POST", "/api/tenants", { tenantKey: "patterns", name: "Patterns" })).status,
    ).toBe(201);
    const created = await asOperator("PUT", "/api/workspaces/patterns-ws", {
      tenantKey: "patterns",
      name: "Patterns",
    });
    expect(created.status, created.text).toBe(201);
    await prefix.receiver.waitFor(1);
    await narrower.receiver.waitFor(1);
    expect(eventsOf(prefix.receiver)).toContain("workspace.created");
    expect(eventsOf(narrower.receiver)).toEqual(["workspace.created"]);
    // tenant.created is no workspace.* event.
    expect(eventsOf(prefix.receiver)).not.toContain("tenant.created");
    expect(unrelated.receiver.received).toEqual([]);
    const refused = await asOperator("POST", "/api/webhooks", {
      eventName: "*.created",
      targetUrl: prefix.receiver.url,
      secret: "s3cret-value",
    });
    expect(refused.status).toBe(400);
  });
});

describe("no delivery loop", () => {
  it("a dead letter of a delivery to S goes to the other * subscriptions, not to S, and stops there", async () => {
    const subs = [await subscribed("*"), await subscribed("*"), await subscribed("*")];
    const [s1, s2] = subs as [(typeof subs)[0], (typeof subs)[0]];
    // S1's delivery of user.created failed for good (written as the job engine leaves it).
    const failedDelivery = (subscriptionId: string, event: string, key: string) =>
      h.sql(
        `INSERT INTO job_reaper.jobs (type, status, payload, idempotency_key, attempts, max_attempts, last_error, completed_at)
         VALUES ('webhook.deliver', 'Failed', $1, $2, 5, 5, 'HTTP 503', now())`,
        [
          JSON.stringify({
            subscriptionId,
            deliveryId: key,
            eventId: key,
            event,
            workspaceKey: null,
            occurredAtUtc: new Date().toISOString(),
            data: {},
          }),
          key,
        ],
      );
    await failedDelivery(s1.id, "user.created", "loop-test-1");
    const deadLetterDeliveries = async () =>
      h.sql<{ subscription_id: string }>(
        `SELECT payload->>'subscriptionId' AS subscription_id FROM job_reaper.jobs
         WHERE type = 'webhook.deliver' AND payload->>'event' = 'job.dead-lettered'
           AND idempotency_key <> 'loop-test-2'`,
      );
    await until(async () => (await deadLetterDeliveries()).length >= 2, 10_000, 100);
    const first = (await deadLetterDeliveries()).map((r) => r.subscription_id).sort();
    expect(first).toEqual([subs[1]?.id, subs[2]?.id].sort());
    expect(first).not.toContain(s1.id);
    // A delivery of that dead letter to S2 fails for good too: it is not announced again.
    await failedDelivery(s2.id, "job.dead-lettered", "loop-test-2");
    await until(
      async () =>
        (
          await h.sql<{ n: number }>(
            "SELECT count(*)::int AS n FROM job_reaper.jobs WHERE idempotency_key = 'loop-test-2' AND announced_at IS NOT NULL",
          )
        )[0]?.n === 1,
      10_000,
      100,
    );
    // Any event about it was published before it was marked announced; a workspace created now raises an
    // event after it, and once that one is matched (its jobs are enqueued together), every earlier one was.
    expect(
      (await asOperator("POST", "/api/tenants", { tenantKey: "loop-sentinel", name: "Sentinel" })).status,
    ).toBe(201);
    const sentinel = await asOperator("PUT", "/api/workspaces/loop-sentinel-ws", {
      tenantKey: "loop-sentinel",
      name: "Sentinel",
    });
    expect(sentinel.status, sentinel.text).toBe(201);
    await until(
      async () =>
        ((
          await h.sql<{ n: number }>(
            "SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'webhook.deliver' AND payload->>'workspaceKey' = 'loop-sentinel-ws'",
          )
        )[0]?.n ?? 0) > 0,
      10_000,
      100,
    );
    expect((await deadLetterDeliveries()).length).toBe(2);
  });
});

describe("nothing about a subscription is dropped or stored blank", () => {
  it("a blank workspaceKey is default; isActive is honoured at create", async () => {
    const receiver = new Receiver();
    await receiver.start();
    receivers.push(receiver);
    const blank = await asOperator("POST", "/api/webhooks", {
      eventName: "user.created",
      targetUrl: receiver.url,
      secret: "s3cret-value",
      workspaceKey: "  ",
      isActive: false,
    });
    expect(blank.status, blank.text).toBe(201);
    expect(blank.json()).toMatchObject({ workspaceKey: "default", isActive: false });
  });

  it("a delivery job without a delivery id is sent without the header, not failed", async () => {
    const { id, receiver } = await subscribed("manual.event");
    await h.sql(
      `INSERT INTO job_reaper.jobs (type, payload, idempotency_key, max_attempts)
       VALUES ('webhook.deliver', $1, 'no-delivery-id', 5)`,
      [
        JSON.stringify({
          subscriptionId: id,
          eventId: "manual-1",
          event: "manual.event",
          workspaceKey: null,
          occurredAtUtc: new Date().toISOString(),
          data: { n: 1 },
        }),
      ],
    );
    await receiver.waitFor(1);
    expect(receiver.received[0]?.headers["x-svc-delivery"]).toBeUndefined();
    expect(receiver.received[0]?.headers["x-svc-event"]).toBe("manual.event");
    await until(
      async () =>
        (
          await h.sql<{ status: string }>(
            "SELECT status FROM job_reaper.jobs WHERE idempotency_key = 'no-delivery-id'",
          )
        )[0]?.status === "Succeeded",
      10_000,
      100,
    );
  });
});
