/**
 * One delivery attempt through the `webhook.deliver` handler, with the subscription tables, the circuit's
 * bucket and the delivery log in memory and a receiver on a local port: no NATS, no PostgreSQL. What the
 * handler promises: a signed POST; a receiver's answer read as the docs say (2xx delivered, 410 turns the
 * subscription off once and announces it, 429 with Retry-After spends no attempt, `webhook-delivery:
 * abort-message` stops the retries, other failures count toward turning it off); a subscription that is off,
 * or was turned on again after the job was made, is not sent to.
 */
import { createHmac, randomUUID } from "node:crypto";

import type { EventPublisher } from "@svc/bus";
import { type ClaimedJob, DeferJobError, PermanentJobError } from "@svc/jobs";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { Receiver } from "../../../test/support/receiver.js";
import { type AttemptTables, deliver, type DeliverDeps, type DisabledRow } from "./deliver.js";
import type { AttemptEntry } from "./delivery-log.js";
import type { DeliverPayload } from "./jobs.js";
import { localOutbound } from "./memory-outbound.js";
import { createSecretBox } from "./secrets.js";
import type { SubscriptionRow } from "./subscription-cache.js";

/** The subscription rows an attempt writes back, in memory, answering as the SQL does. */
class MemoryAttemptTables implements AttemptTables {
  readonly rows = new Map<string, SubscriptionRow & { failing_attempts: number }>();
  readonly ended: string[] = [];
  readonly announced: Array<{ id: string; at: Date }> = [];

  async turnOff(subscriptionId: string, reason: string): Promise<DisabledRow | null> {
    const row = this.rows.get(subscriptionId);
    if (row === undefined || !row.is_active) return null;
    Object.assign(row, {
      is_active: false,
      disabled_at: new Date(),
      disabled_announced: false,
      disabled_reason: reason,
    });
    return { ...row, disabled_at: row.disabled_at as Date };
  }
  async markAnnounced(subscriptionId: string, disabledAt: Date) {
    const row = this.rows.get(subscriptionId);
    if (row?.disabled_at?.getTime() === disabledAt.getTime()) row.disabled_announced = true;
    this.announced.push({ id: subscriptionId, at: disabledAt });
  }
  async noteFailing(subscriptionId: string, counting: boolean) {
    const row = this.rows.get(subscriptionId) as SubscriptionRow & { failing_attempts: number };
    row.failing_since ??= new Date();
    if (counting) row.failing_attempts++;
    return { failingSince: row.failing_since, failingAttempts: row.failing_attempts };
  }
  async markHealthy(subscriptionId: string) {
    const row = this.rows.get(subscriptionId);
    if (row !== undefined) Object.assign(row, { failing_since: null, failing_attempts: 0 });
  }
  async endWaiting(deliveryId: string) {
    this.ended.push(deliveryId);
  }
}

const secrets = createSecretBox(Buffer.alloc(32, 7).toString("base64"));
const SECRET = "whsec_dGhlIHN1YnNjcmlwdGlvbidzIG93biBzZWNyZXQ=";

/** The receiver; each test sets its answer. */
const receiver = new Receiver();
const received = receiver.received;
let target: string;
beforeAll(async () => {
  target = await receiver.start();
});
afterAll(() => receiver.stop());

let tables: MemoryAttemptTables;
let logged: AttemptEntry[];
let published: Array<{ eventName: string; payload: unknown; eventId?: string }>;
let deps: DeliverDeps;

function subscription(over: Partial<SubscriptionRow> = {}): SubscriptionRow & { failing_attempts: number } {
  return {
    id: randomUUID(),
    target_url: target,
    secret_encrypted: secrets.seal(SECRET),
    previous_secret_encrypted: null,
    previous_secret_expires_at: null,
    is_active: true,
    include_sensitive_data: false,
    workspace_key: "alpha",
    disabled_at: null,
    disabled_announced: false,
    disabled_reason: null,
    failing_since: null,
    throttle_per_second: null,
    resumed_at: null,
    headers_sealed: null,
    ed25519_private_sealed: null,
    failing_attempts: 0,
    ...over,
  };
}

function job(subscriptionId: string, attempt = 1, createdAt = new Date()): ClaimedJob<DeliverPayload> {
  return {
    id: "1",
    type: "webhook.deliver",
    payload: {
      subscriptionId,
      deliveryId: randomUUID(),
      eventId: randomUUID(),
      event: "user.created",
      workspaceKey: "alpha",
      occurredAtUtc: new Date().toISOString(),
      data: { userId: "u-1", password: "never shown" },
    },
    workspaceKey: "alpha",
    attempt,
    maxAttempts: 5,
    token: "1",
    runAt: new Date(),
    leaseExpiresAt: new Date(Date.now() + 60_000),
    traceContext: null,
    createdAt,
  };
}

beforeEach(() => {
  tables = new MemoryAttemptTables();
  logged = [];
  published = [];
  received.length = 0;
  receiver.respond = () => ({ status: 200 });
  const events: EventPublisher = {
    publish: async (eventName, _workspaceKey, payload, options) => {
      published.push({ eventName, payload, ...(options?.eventId ? { eventId: options.eventId } : {}) });
      return { eventId: options?.eventId ?? randomUUID(), seq: published.length, duplicate: false };
    },
  };
  deps = {
    ...localOutbound(secrets),
    tables,
    throttle: { admit: async () => ({ allowed: true, retryInMs: 0 }) },
    subscriptions: { load: async (id) => tables.rows.get(id) ?? null },
    deliveryLog: { record: (entry) => void logged.push(entry) },
    disableAfterFailingMs: 0,
    disableAfterFailures: 0,
    events,
  };
});

const add = (row: SubscriptionRow & { failing_attempts: number }) => {
  tables.rows.set(row.id, row);
  return row;
};

describe("the webhook.deliver handler", () => {
  it("POSTs the masked event signed with the subscription's secret, logs it delivered and marks a failing subscription healthy", async () => {
    const sub = add(subscription({ failing_since: new Date(Date.now() - 60_000) }));
    const j = job(sub.id);
    await deliver(deps, j);
    expect(received).toHaveLength(1);
    const [request] = received;
    const body = request?.body as string;
    expect(JSON.parse(body)).toMatchObject({
      event: "user.created",
      data: { userId: "u-1", password: expect.stringContaining("***") },
    });
    expect(body).not.toContain("never shown");
    const expected = `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
    expect(request?.headers["x-svc-signature"]).toBe(expected);
    expect(request?.headers["webhook-id"]).toBe(j.payload.deliveryId);
    expect(String(request?.headers["webhook-signature"])).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    expect(logged).toMatchObject([{ outcome: "delivered", status: "delivered", statusCode: 200 }]);
    expect(tables.rows.get(sub.id)?.failing_since).toBeNull();
  });

  it("turns the subscription off at a 410, announcing it once, and ends the job for good", async () => {
    const sub = add(subscription());
    receiver.respond = () => ({ status: 410 });
    await expect(deliver(deps, job(sub.id))).rejects.toBeInstanceOf(PermanentJobError);
    expect(tables.rows.get(sub.id)).toMatchObject({
      is_active: false,
      disabled_reason: "the receiver answered 410 Gone",
      disabled_announced: true,
    });
    expect(published).toMatchObject([{ eventName: "webhook.disabled", payload: { subscriptionId: sub.id } }]);
    // Off now: the next queued delivery is not sent, its log entry ends, and nothing is announced again.
    const next = job(sub.id);
    await deliver(deps, next);
    expect(received).toHaveLength(1);
    expect(tables.ended).toEqual([next.payload.deliveryId]);
    expect(published).toHaveLength(1);
  });

  it("announces a turning off that a crash left unannounced, with the same event id", async () => {
    const disabledAt = new Date("2026-11-27T10:00:00.000Z");
    const sub = add(
      subscription({ is_active: false, disabled_at: disabledAt, disabled_reason: "every delivery failed" }),
    );
    await deliver(deps, job(sub.id));
    await deliver(deps, job(sub.id));
    expect(received).toHaveLength(0);
    // Announced once: the first run marked it.
    expect(published).toHaveLength(1);
    expect(tables.announced).toEqual([{ id: sub.id, at: disabledAt }]);
  });

  it("spends no attempt on a 429 with Retry-After: deferred that long, the subscription not failing", async () => {
    const sub = add(subscription());
    receiver.respond = () => ({ status: 429, headers: { "retry-after": "7" } });
    const error = await deliver(deps, job(sub.id)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeferJobError);
    expect((error as DeferJobError).delayMs).toBe(7_000);
    expect(tables.rows.get(sub.id)?.failing_since).toBeNull();
    expect(logged).toMatchObject([{ outcome: "deferred", status: "retrying" }]);
  });

  it("stops a message's retries when the receiver answers webhook-delivery: abort-message", async () => {
    const sub = add(subscription());
    receiver.respond = () => ({ status: 400, headers: { "webhook-delivery": "abort-message" } });
    await expect(deliver(deps, job(sub.id))).rejects.toBeInstanceOf(PermanentJobError);
    // One request: not retried within the attempt either.
    expect(received).toHaveLength(1);
    expect(logged).toMatchObject([{ outcome: "failed", status: "failed", statusCode: 400 }]);
    expect(tables.rows.get(sub.id)?.failing_since).not.toBeNull();
  });

  it("turns a subscription off after the configured failures in a row, and a failure before that is retried", async () => {
    deps = { ...deps, disableAfterFailures: 2 };
    const sub = add(subscription());
    receiver.respond = () => ({ status: 400 });
    await expect(deliver(deps, job(sub.id, 1))).rejects.toThrow("receiver answered 400");
    expect(tables.rows.get(sub.id)).toMatchObject({ is_active: true, failing_attempts: 1 });
    expect(logged.at(-1)).toMatchObject({ outcome: "failed", status: "retrying" });
    await expect(deliver(deps, job(sub.id, 2))).rejects.toThrow("receiver answered 400");
    expect(tables.rows.get(sub.id)).toMatchObject({
      is_active: false,
      disabled_reason: "the last 2 delivery attempts failed",
    });
    expect(published.map((e) => e.eventName)).toEqual(["webhook.disabled"]);
  });

  it("does not send a delivery queued before the subscription was turned on again", async () => {
    const sub = add(subscription({ resumed_at: new Date() }));
    const stale = job(sub.id, 2, new Date(Date.now() - 60_000));
    await deliver(deps, stale);
    expect(received).toHaveLength(0);
    expect(tables.ended).toEqual([stale.payload.deliveryId]);
    // One made after it is sent.
    await deliver(deps, job(sub.id, 1, new Date(Date.now() + 1_000)));
    expect(received).toHaveLength(1);
  });
});
