/**
 * The delivery-log routes through their contract, with the tables in memory: no NATS, no PostgreSQL.
 * What the routes promise: a workspace session reads, resends and recovers only the deliveries of its
 * own workspace's subscriptions (another's are as if they did not exist); a resend is refused while the
 * delivery waits for an attempt, when its subscription is off or deleted, or when its job is gone, and
 * changes nothing then; a recovery needs a period that ends after it begins and a subscription that is on.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, webhookRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  type AttemptRow,
  type DeliveryDetail,
  type DeliveryFilter,
  type DeliveryRepository,
  type DeliveryRow,
  getDelivery,
  getRecovery,
  listDeliveries,
  type RecoveryRow,
  type ResendCandidate,
  resendDelivery,
  startRecovery,
} from "./deliveries.js";
import type { DeliveryStatus } from "./delivery-log.js";
import { MemorySubscriptions } from "./memory-subscriptions.js";

type Stored = DeliveryRow & { body: string | null; reach_key: string | null; has_job: boolean };

/** The delivery log in memory, over the subscriptions' table (a deleted subscription reads as null). */
class MemoryDeliveries implements DeliveryRepository {
  readonly rows: Stored[] = [];
  readonly attempts = new Map<string, AttemptRow[]>();
  readonly recoveries: Array<RecoveryRow & { reach_key: string | null }> = [];
  readonly resends: string[] = [];
  lastFilter: DeliveryFilter | undefined;
  private clock = Date.parse("2026-11-27T10:00:00.000Z");

  constructor(private readonly subscriptions: MemorySubscriptions) {}

  add(subscriptionId: string, status: DeliveryStatus, eventName = "user.created", hasJob = true): Stored {
    const sub = this.subscriptions.rows.find((s) => s.id === subscriptionId);
    const created = new Date((this.clock += 1_000));
    const row: Stored = {
      delivery_id: crypto.randomUUID(),
      subscription_id: subscriptionId,
      workspace_key: sub?.workspace_key ?? null,
      reach_key: sub?.workspace_key ?? null,
      event_name: eventName,
      event_id: crypto.randomUUID(),
      status,
      attempts: 1,
      last_status_code: status === "delivered" ? 200 : 500,
      created_at: created,
      updated_at: created,
      created_at_us: created.toISOString().replace("Z", "000Z"),
      body: JSON.stringify({
        event: eventName,
        workspaceKey: null,
        occurredAtUtc: created.toISOString(),
        data: {},
      }),
      has_job: hasJob,
    };
    this.rows.push(row);
    return row;
  }

  async page(filter: DeliveryFilter) {
    this.lastFilter = filter;
    return this.rows
      .filter(
        (r) =>
          r.subscription_id === filter.subscriptionId &&
          (filter.status === undefined || r.status === filter.status) &&
          (filter.eventName === undefined || r.event_name === filter.eventName),
      )
      .sort((a, b) => b.created_at.getTime() - a.created_at.getTime())
      .filter((r) => filter.page.after === null || r.created_at_us < (filter.page.after[0] as string))
      .slice(0, filter.page.limit + 1);
  }

  async find(
    deliveryId: string,
    subscriptionId: string,
    within: string | null,
  ): Promise<DeliveryDetail | null> {
    const delivery = this.lookup(deliveryId, subscriptionId, within);
    if (delivery === undefined) return null;
    return {
      delivery,
      attempts: this.attempts.get(deliveryId) ?? [],
      nextAttemptAt: delivery.status === "retrying" ? new Date(this.clock + 60_000) : null,
    };
  }

  async resend(
    deliveryId: string,
    subscriptionId: string,
    within: string | null,
    check: (candidate: ResendCandidate) => void,
  ) {
    const row = this.lookup(deliveryId, subscriptionId, within);
    if (row === undefined) return "not-found" as const;
    const sub = this.subscriptions.rows.find((s) => s.id === subscriptionId);
    check({ status: row.status, subscriptionActive: sub === undefined ? null : sub.is_active });
    if (!row.has_job) return "no-job" as const;
    row.status = "retrying";
    this.resends.push(deliveryId);
    return "queued" as const;
  }

  async startRecovery(subscription: { id: string; workspaceKey: string | null }, since: Date, until: Date) {
    const row = {
      id: crypto.randomUUID(),
      subscription_id: subscription.id,
      reach_key: subscription.workspaceKey,
      since,
      until,
      status: "running" as const,
      queued: 0,
      created_at: new Date((this.clock += 1_000)),
      finished_at: null,
    };
    this.recoveries.push(row);
    return row;
  }

  async findRecovery(recoveryId: string, subscriptionId: string, within: string | null) {
    return (
      this.recoveries.find(
        (r) =>
          r.id === recoveryId &&
          r.subscription_id === subscriptionId &&
          (within === null || r.reach_key === within),
      ) ?? null
    );
  }

  private lookup(deliveryId: string, subscriptionId: string, within: string | null) {
    return this.rows.find(
      (r) =>
        r.delivery_id === deliveryId &&
        r.subscription_id === subscriptionId &&
        (within === null || r.reach_key === within),
    );
  }
}

const operator = caller(["webhook.read", "webhook.manage"]);
const session = (workspaceKey: string, permissions = ["webhook.read", "webhook.manage"]): Principal => ({
  subject: `admin-${workspaceKey}`,
  scope: "workspace",
  workspaceKey,
  permissions,
  roles: ["admin"],
});

let subscriptions: MemorySubscriptions;
let log: MemoryDeliveries;
let alphaSub: string;
let betaSub: string;

async function subscribe(workspaceKey: string): Promise<string> {
  const row = await subscriptions.insert({
    workspaceKey,
    eventName: "user.created",
    targetUrl: "https://receiver.example.com/hooks",
    secretSealed: "sealed",
    includeSensitiveData: false,
    description: "",
    isActive: true,
    throttlePerSecond: null,
    headers: null,
    ed25519: null,
  });
  return row.id;
}

const api = {
  list: (principal: Principal, id: string, query: Record<string, unknown> = {}) =>
    callRoute(webhookRoutes["webhooks.deliveries"], (req) => listDeliveries(log, subscriptions, req), {
      principal,
      params: { id },
      query,
      body: null,
    }),
  get: (principal: Principal, id: string, deliveryId: string) =>
    callRoute(webhookRoutes["webhooks.delivery"], (req) => getDelivery(log, req), {
      principal,
      params: { id, deliveryId },
      query: {},
      body: null,
    }),
  resend: (principal: Principal, id: string, deliveryId: string) =>
    callRoute(webhookRoutes["webhooks.resend"], (req) => resendDelivery(log, req), {
      principal,
      params: { id, deliveryId },
      query: {},
      body: null,
    }),
  recover: (principal: Principal, id: string, query: Record<string, unknown>) =>
    callRoute(webhookRoutes["webhooks.recover"], (req) => startRecovery(log, subscriptions, req), {
      principal,
      params: { id },
      query,
      body: null,
    } as never),
  recovery: (principal: Principal, id: string, recoveryId: string) =>
    callRoute(webhookRoutes["webhooks.recovery"], (req) => getRecovery(log, req), {
      principal,
      params: { id, recoveryId },
      query: {},
      body: null,
    }),
};

beforeEach(async () => {
  subscriptions = new MemorySubscriptions();
  log = new MemoryDeliveries(subscriptions);
  alphaSub = await subscribe("alpha");
  betaSub = await subscribe("beta");
});

describe("the delivery log", () => {
  it("lists a subscription's deliveries newest first with the filters given, and none of another workspace's", async () => {
    const first = log.add(alphaSub, "delivered");
    const second = log.add(alphaSub, "failed");
    log.add(betaSub, "failed");
    const all = await api.list(session("alpha"), alphaSub);
    expect(all.body?.items.map((d) => d.deliveryId)).toEqual([second.delivery_id, first.delivery_id]);
    expect(all.body?.items[1]).toMatchObject({
      status: "delivered",
      lastStatusCode: 200,
      workspaceKey: "alpha",
    });
    const failed = await api.list(session("alpha"), alphaSub, {
      status: "failed",
      since: "2026-11-27T00:00:00Z",
    });
    expect(failed.body?.items.map((d) => d.deliveryId)).toEqual([second.delivery_id]);
    expect(log.lastFilter).toMatchObject({
      subscriptionId: alphaSub,
      status: "failed",
      since: "2026-11-27T00:00:00Z",
    });
    expect(log.lastFilter).not.toHaveProperty("until");
    // Another workspace's subscription: 404 before its log is read.
    log.lastFilter = undefined;
    await expect(api.list(session("alpha"), betaSub)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(log.lastFilter).toBeUndefined();
    // Paging: a cursor goes on where the page ended.
    const page = await api.list(operator, alphaSub, { limit: 1 });
    const next = await api.list(operator, alphaSub, { limit: 1, cursor: page.body?.nextCursor });
    expect(next.body?.items.map((d) => d.deliveryId)).toEqual([first.delivery_id]);
  });

  it("shows one delivery with its payload, attempts and next attempt, to its workspace and the platform only", async () => {
    const d = log.add(alphaSub, "retrying");
    log.attempts.set(d.delivery_id, [
      {
        attempt: 1,
        attempted_at: new Date("2026-11-27T10:00:01Z"),
        duration_ms: 31,
        outcome: "failed",
        status_code: 503,
        response_excerpt: "busy",
        error: null,
      },
    ]);
    const shown = await api.get(session("alpha"), alphaSub, d.delivery_id);
    expect(shown.body).toMatchObject({
      deliveryId: d.delivery_id,
      status: "retrying",
      payload: { event: "user.created" },
      history: [{ attempt: 1, statusCode: 503, responseExcerpt: "busy", durationMs: 31, outcome: "failed" }],
    });
    expect(shown.body?.nextAttemptAtUtc).toMatch(/^2026-11-27T/);
    expect((await api.get(operator, alphaSub, d.delivery_id)).status).toBe(200);
    await expect(api.get(session("beta"), alphaSub, d.delivery_id)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    // The delivery under another subscription's id: not found either.
    await expect(api.get(operator, betaSub, d.delivery_id)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
  });
});

describe("resending a delivery", () => {
  it("queues a failed or delivered one again, once: it shows retrying and a second resend is a 409", async () => {
    const d = log.add(alphaSub, "failed");
    const sent = await api.resend(session("alpha"), alphaSub, d.delivery_id);
    expect(sent).toMatchObject({
      status: 202,
      body: { deliveryId: d.delivery_id, status: "retrying" },
      headers: { location: `/api/webhooks/${alphaSub}/deliveries/${d.delivery_id}` },
    });
    await expect(api.resend(session("alpha"), alphaSub, d.delivery_id)).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
    expect(log.resends).toEqual([d.delivery_id]);
    const delivered = log.add(alphaSub, "delivered");
    expect((await api.resend(operator, alphaSub, delivered.delivery_id)).status).toBe(202);
  });

  it("refuses, changing nothing, another workspace's delivery, an off or deleted subscription's, one with no job left, and a reader", async () => {
    const d = log.add(alphaSub, "failed");
    await expect(api.resend(session("beta"), alphaSub, d.delivery_id)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(
      api.resend(session("alpha", ["webhook.read"]), alphaSub, d.delivery_id),
    ).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
    });
    await subscriptions.setActive(alphaSub, null, false);
    await expect(api.resend(session("alpha"), alphaSub, d.delivery_id)).rejects.toThrow(/turned off/);
    await subscriptions.remove(alphaSub, null);
    await expect(api.resend(operator, alphaSub, d.delivery_id)).rejects.toThrow(/was deleted/);
    const orphan = log.add(betaSub, "failed", "user.created", false);
    await expect(api.resend(operator, betaSub, orphan.delivery_id)).rejects.toThrow(/no job left/);
    expect(log.resends).toEqual([]);
    expect(log.rows.map((r) => r.status)).toEqual(["failed", "failed"]);
  });
});

describe("recovering a period", () => {
  it("records a recovery of the subscription's workspace, readable by that workspace and the platform", async () => {
    const started = await api.recover(session("alpha"), alphaSub, {
      since: "2026-11-26T00:00:00Z",
      until: "2026-11-27T00:00:00Z",
    });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({
      subscriptionId: alphaSub,
      sinceUtc: "2026-11-26T00:00:00.000Z",
      untilUtc: "2026-11-27T00:00:00.000Z",
      status: "running",
      queued: 0,
    });
    const id = started.body?.recoveryId as string;
    expect(started.headers?.location).toBe(`/api/webhooks/${alphaSub}/recoveries/${id}`);
    expect(log.recoveries[0]?.reach_key).toBe("alpha");
    expect((await api.recovery(session("alpha"), alphaSub, id)).body?.recoveryId).toBe(id);
    expect((await api.recovery(operator, alphaSub, id)).status).toBe(200);
    await expect(api.recovery(session("beta"), alphaSub, id)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    // Until left out: now.
    const open = await api.recover(operator, alphaSub, { since: "2026-11-26T00:00:00Z" });
    expect(Date.parse(open.body?.untilUtc as string)).toBeGreaterThan(Date.parse("2026-11-27T00:00:00Z"));
  });

  it("refuses a period that does not end after it begins, an off subscription and another workspace's, recording nothing", async () => {
    await expect(
      api.recover(operator, alphaSub, { since: "2026-11-27T00:00:00Z", until: "2026-11-27T00:00:00Z" }),
    ).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [expect.objectContaining({ field: "/query/since" })],
    });
    await expect(api.recover(operator, alphaSub, { since: "2999-01-01T00:00:00Z" })).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
    });
    await expect(
      api.recover(session("beta"), alphaSub, { since: "2026-11-26T00:00:00Z" }),
    ).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await subscriptions.setActive(alphaSub, null, false);
    await expect(api.recover(operator, alphaSub, { since: "2026-11-26T00:00:00Z" })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
    expect(log.recoveries).toEqual([]);
  });
});
