/**
 * Publish → match → mask → sign → deliver to a real local receiver, with retries, dead letters,
 * the circuit breaker, disabled and deleted subscriptions, and subscription management via the gateway.
 */
import { spawnSync } from "node:child_process";
import { createPublicKey, randomBytes, verify as cryptoVerify } from "node:crypto";
import { join } from "node:path";

import type { NatsConnection } from "@nats-io/transport-node";
import { verify } from "@octokit/webhooks-methods";
import type { EventPublisher } from "@svc/bus";
import { createDb, type Db, sql } from "@svc/db";
import { cancelJob, enqueue, runPendingJobsNow } from "@svc/jobs";
import type { RunningService } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { deliverJob, settleAllStrandedDeliveries, sweepDeliveryLog } from "@svc/service-webhook-dispatcher";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { platformPublisher } from "./support/publisher.js";
import { type Received, Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { eventually, until } from "./support/wait.js";

const h = await createHarness();
const receiver = new Receiver();
const db: Db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 4, applicationName: "webhooks-test" });
let base: string;
let operator: string;
let nc: NatsConnection;
let events: EventPublisher;
let dispatcher: RunningService;

/** A sample of the dispatcher's metrics: the value for these labels (0 when there is none). */
async function sample(name: string, labels: Record<string, string>): Promise<number> {
  const metric = dispatcher.deps.metrics.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const found = values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return found?.value ?? 0;
}
const circuitsNotClosed = async () =>
  (await sample("svc_webhook_circuits", { state: "open" })) +
  (await sample("svc_webhook_circuits", { state: "half_open" }));
/** Receivers of single tests, stopped at the end even when a test fails. */
const ownReceivers: Receiver[] = [];

const env = {
  BackendHost__RateLimitApiPerMinute: "0",
  BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  BackendHost__JobPollIntervalMs: "100",
  BackendHost__WebhookCircuitFailureThreshold: "3",
  // Long enough for the steps a test takes while a circuit is open (publish, defer, check) on a slow
  // machine: at 1.5 s, a deferral late by that much became a trial request.
  BackendHost__WebhookCircuitOpenMs: "3000",
  // Long enough that a test process starved of CPU for seconds (the receiver and the dispatcher share its
  // event loop) does not time a request out before the receiver has read it.
  BackendHost__WebhookTimeoutMs: "15000",
  BackendHost__WebhookRecoveryPageSize: "2",
};

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

async function subscribe(body: Record<string, unknown>) {
  const response = await asOperator("POST", "/api/webhooks", {
    targetUrl: receiver.url,
    secret: "s3cret-value",
    ...body,
  });
  expect(response.status).toBe(201);
  return response.json<{ id: string }>();
}

/**
 * A receiver of one test's own, subscribed to `eventName`: circuits are per receiver, so other tests'
 * failures do not count against it. Stopped at the end even when the test fails.
 */
async function subscribedReceiver(eventName: string, secret = "s3cret-value"): Promise<Receiver> {
  return (await ownSubscription(eventName, secret)).own;
}

/** `subscribedReceiver`, with its subscription. */
async function ownSubscription(
  eventName: string,
  secret = "s3cret-value",
): Promise<{ own: Receiver; sub: { id: string } }> {
  const own = new Receiver();
  await own.start();
  ownReceivers.push(own);
  return { own, sub: await subscribe({ eventName, targetUrl: own.url, secret }) };
}

/** Whether the webhook.disabled of a subscription a 410 turned off has been published. */
async function disabledAnnounced(subscriptionId: string): Promise<boolean> {
  const row = await db.one<{ disabled_announced: boolean }>(
    sql`SELECT disabled_announced FROM webhook_dispatcher.subscriptions WHERE id = ${subscriptionId}`,
  );
  return row.disabled_announced;
}

/** Makes a retried delivery due now: the schedule itself is asserted by the job engine's tests. */
const hurry = () => runPendingJobsNow(db);

/** The only delivery job, or a stand-in while the matcher has not enqueued it yet. */
async function onlyJob() {
  const job = await db.maybeOne<{ status: string; attempts: number; last_error: string | null }>(
    sql`SELECT status, attempts, last_error FROM job_reaper.jobs`,
  );
  return job ?? { status: "not enqueued", attempts: 0, last_error: null };
}

/**
 * Waits until attempt `attempt` of the only job has failed and been written back (Pending with that many
 * attempts), optionally lets `pauseMs` pass, then makes the retry due now. Waiting for the write-back,
 * not for the receiver, is what makes this independent of the machine's load.
 */
async function retryNow(attempt: number, circuitOf?: string) {
  await until(async () => {
    const job = await onlyJob();
    return job.status === "Pending" && job.attempts === attempt;
  }, 15_000);
  // An open circuit would defer the retry: wait for it to let a trial through.
  if (circuitOf !== undefined) {
    await until(async () => {
      const circuit = await api("GET", `/api/webhooks/${circuitOf}/circuit`, operator);
      return circuit.json<{ state: string }>().state !== "open";
    }, 15_000);
  }
  await runPendingJobsNow(db, { attempts: attempt });
}

beforeAll(async () => {
  await receiver.start();
  await h.start(rbacService, env);
  dispatcher = await h.start(webhookDispatcherService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({
    scope: "platform",
    permissions: ["webhook.read", "webhook.manage", "flow.read"],
  });
  ({ nc, events } = await platformPublisher(h));
});

/**
 * The cleanup between tests runs beside the live dispatcher, still finishing the last test's work: a
 * deadlock PostgreSQL breaks by aborting the cleanup (40P01) is retried.
 */
async function clean(statement: Parameters<Db["query"]>[0]) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.query(statement);
    } catch (error) {
      if ((error as { code?: string }).code !== "40P01" || attempt === 5) throw error;
    }
  }
}

beforeEach(async () => {
  await clean(sql`DELETE FROM webhook_dispatcher.subscriptions`);
  await clean(sql`TRUNCATE job_reaper.jobs`);
  await clean(sql`TRUNCATE webhook_dispatcher.deliveries, webhook_dispatcher.delivery_attempts`);
  receiver.received.length = 0;
  receiver.respond = () => ({ status: 200 });
});

afterAll(async () => {
  await h.stopAll();
  await nc.close();
  await db.end();
  await receiver.stop();
  for (const r of ownReceivers) await r.stop().catch(() => undefined);
});

describe("subscriptions", () => {
  it("rejects an invalid create request listing each invalid field", async () => {
    const response = await asOperator("POST", "/api/webhooks", {
      eventName: "user.created\r\nX-Evil: 1",
      targetUrl: "/relative",
    });
    expect(response.status).toBe(400);
    const fields = response
      .json<{ errors: Array<{ field: string }> }>()
      .errors.map((e) => e.field)
      .sort();
    expect(fields).toEqual(["/body/eventName", "/body/secret", "/body/targetUrl"]);
  });

  it("never returns the secret, and computes matchesKnownEvent on read", async () => {
    const created = await asOperator("POST", "/api/webhooks", {
      eventName: "user.created",
      targetUrl: receiver.url,
      secret: "top-secret-1",
    });
    expect(created.text).not.toContain("top-secret-1");
    await subscribe({ eventName: "workspace.*" });
    await subscribe({ eventName: "call.started" });
    await subscribe({ eventName: "*" });
    const list = await asOperator("GET", "/api/webhooks");
    expect(list.text).not.toContain("s3cret-value");
    const byName = Object.fromEntries(
      list
        .json<{ items: Array<{ eventName: string; matchesKnownEvent: boolean }> }>()
        .items.map((s) => [s.eventName, s.matchesKnownEvent]),
    );
    expect(byName).toEqual({ "user.created": true, "workspace.*": true, "call.started": false, "*": true });
    const catalog = (await asOperator("GET", "/api/events/catalog")).json<Array<{ eventName: string }>>();
    expect(catalog.map((e) => e.eventName)).toContain("workspace.member-assigned");
  });

  it("pages with a cursor and limits a workspace session to its workspace", async () => {
    for (let i = 0; i < 5; i++)
      await subscribe({ eventName: `e${i}`, workspaceKey: i < 3 ? "acme" : "other" });
    const first = (await asOperator("GET", "/api/webhooks?limit=2")).json<{
      items: unknown[];
      nextCursor: string;
    }>();
    const second = (await asOperator("GET", `/api/webhooks?limit=2&cursor=${first.nextCursor}`)).json<{
      items: unknown[];
      nextCursor: string;
    }>();
    const third = (await asOperator("GET", `/api/webhooks?limit=2&cursor=${second.nextCursor}`)).json<{
      items: unknown[];
      nextCursor: string | null;
    }>();
    expect([first.items.length, second.items.length, third.items.length]).toEqual([2, 2, 1]);
    expect(third.nextCursor).toBeNull();
    const scoped = await mintToken({
      scope: "workspace",
      workspaceKey: "acme",
      permissions: ["webhook.read", "webhook.manage"],
    });
    const mine = (await api("GET", "/api/webhooks", scoped)).json<{
      items: Array<{ workspaceKey: string }>;
    }>();
    expect(mine.items.map((s) => s.workspaceKey)).toEqual(["acme", "acme", "acme"]);
    expect((await api("GET", "/api/webhooks?workspaceKey=other", scoped)).status).toBe(404);
    const theirs = (await asOperator("GET", "/api/webhooks?workspaceKey=other")).json<{
      items: Array<{ id: string }>;
    }>().items[0];
    expect((await api("DELETE", `/api/webhooks/${theirs?.id}`, scoped)).status).toBe(404);
  });
});

describe("delivery", () => {
  it("delivers a signed envelope that an independent verifier accepts, masking sensitive fields at depth", async () => {
    const masked = await subscribe({ eventName: "user.created" });
    const raw = await subscribe({ eventName: "*", includeSensitiveData: true });
    const payload = {
      userId: "u1",
      email: "alice@example.com",
      profile: { contacts: [{ displayName: "Alice Liddell", note: "n" }] },
    };
    await events.publish("user.created", "acme", payload);
    await receiver.waitFor(2);
    const bySub = new Map<string, (typeof receiver.received)[number]>();
    for (const r of receiver.received) {
      expect(await verify("s3cret-value", r.body, r.headers["x-svc-signature"] as string)).toBe(true);
      expect(await verify("wrong-secret", r.body, r.headers["x-svc-signature"] as string)).toBe(false);
      expect(r.headers["x-svc-event"]).toBe("user.created");
      expect(r.headers["x-svc-delivery"]).toMatch(/^[0-9a-f-]{36}$/);
      bySub.set(JSON.parse(r.body).data.email === payload.email ? raw.id : masked.id, r);
    }
    const maskedBody = JSON.parse(bySub.get(masked.id)?.body ?? "{}");
    expect(maskedBody).toMatchObject({
      event: "user.created",
      workspaceKey: "acme",
      data: {
        userId: "u1",
        email: "ali***om",
        profile: { contacts: [{ displayName: "Ali***ll", note: "n" }] },
      },
    });
    expect(Number.isNaN(Date.parse(maskedBody.occurredAtUtc))).toBe(false);
    expect(JSON.parse(bySub.get(raw.id)?.body ?? "{}").data).toEqual(payload);
  });

  it("signs every delivery the Standard Webhooks way too: the official library and the documented Python recipe verify it", async () => {
    const whsec = `whsec_${randomBytes(32).toString("base64")}`;
    const keyed = await subscribedReceiver("user.created", whsec);
    const plain = await subscribedReceiver("user.created");
    await events.publish("user.created", "acme", { userId: "u-standard" });
    await keyed.waitFor(1);
    await plain.waitFor(1);
    const [k, p] = [keyed.received[0], plain.received[0]] as [Received, Received];
    const headers = (r: Received) => r.headers as Record<string, string>;
    // The delivery id is the message id; the timestamp is the attempt's, in seconds.
    expect(k.headers["webhook-id"]).toBe(k.headers["x-svc-delivery"]);
    expect(Math.abs(Number(k.headers["webhook-timestamp"]) - k.at / 1000)).toBeLessThan(5);
    expect(new Webhook(whsec).verify(k.body, headers(k))).toMatchObject({ data: { userId: "u-standard" } });
    expect(
      new Webhook(Buffer.from("s3cret-value"), { format: "raw" }).verify(p.body, headers(p)),
    ).toMatchObject({ data: { userId: "u-standard" } });
    // The spec's own header is unchanged: keyed by the secret's text, whatever its form.
    expect(await verify(whsec, k.body, k.headers["x-svc-signature"] as string)).toBe(true);
    expect(await verify("s3cret-value", p.body, p.headers["x-svc-signature"] as string)).toBe(true);
    const python = spawnSync("python3", [join(repoRoot, "test", "clients", "standard_webhooks_verify.py")], {
      input: JSON.stringify([
        { secret: whsec, headers: k.headers, body: k.body },
        { secret: "s3cret-value", headers: p.headers, body: p.body },
        { secret: "s3cret-value", headers: k.headers, body: k.body },
        { secret: whsec, headers: k.headers, body: k.body.replace("u-standard", "u-forged") },
      ]),
      encoding: "utf8",
    });
    expect(JSON.parse(python.stdout || "null"), python.stderr).toEqual([
      "ok",
      "ok",
      "no matching signature",
      "no matching signature",
    ]);
  });

  it("signs the asymmetric way too when asked (v1a, ed25519): Node's crypto and Python's cryptography verify it with the public key", async () => {
    const own = new Receiver();
    await own.start();
    ownReceivers.push(own);
    const whsec = `whsec_${randomBytes(32).toString("base64")}`;
    const made = await asOperator("POST", "/api/webhooks", {
      eventName: "user.created",
      targetUrl: own.url,
      secret: whsec,
      ed25519: true,
    });
    expect(made.status, made.text).toBe(201);
    const { id, ed25519PublicKey } = made.json<{ id: string; ed25519PublicKey: string }>();
    expect(ed25519PublicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    await events.publish("user.created", null, { userId: "u-v1a" });
    await own.waitFor(1);
    const r = own.received[0] as Received;
    const headers = r.headers as Record<string, string>;
    const entries = headers["webhook-signature"]?.split(" ") ?? [];
    expect(entries.map((e) => e.split(",")[0])).toEqual(["v1", "v1a"]);
    // The documented Node recipe: the public key's 32 bytes as a JWK, and crypto.verify.
    const publicKey = createPublicKey({
      key: {
        kty: "OKP",
        crv: "Ed25519",
        x: Buffer.from(ed25519PublicKey.slice("whpk_".length), "base64").toString("base64url"),
      },
      format: "jwk",
    });
    const signed = Buffer.from(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${r.body}`);
    const v1a = Buffer.from((entries[1] as string).slice("v1a,".length), "base64");
    expect(cryptoVerify(null, signed, publicKey, v1a)).toBe(true);
    expect(cryptoVerify(null, Buffer.from(`${signed.toString()}x`), publicKey, v1a)).toBe(false);
    // The HMAC entry still verifies with the official library, which skips the entry it does not know.
    expect(new Webhook(whsec).verify(r.body, headers)).toMatchObject({ data: { userId: "u-v1a" } });
    const python = spawnSync("python3", [join(repoRoot, "test", "clients", "standard_webhooks_verify.py")], {
      input: JSON.stringify([
        { publicKey: ed25519PublicKey, headers, body: r.body },
        { publicKey: ed25519PublicKey, headers, body: r.body.replace("u-v1a", "u-forged") },
      ]),
      encoding: "utf8",
    });
    expect(JSON.parse(python.stdout || "null"), python.stderr).toEqual(["ok", "no matching signature"]);
    // The key stays while ed25519 stays on; off drops it.
    const kept = await asOperator("PUT", `/api/webhooks/${id}`, {
      eventName: "user.created",
      targetUrl: own.url,
      ed25519: true,
    });
    expect(kept.json()).toMatchObject({ ed25519PublicKey });
    const off = await asOperator("PUT", `/api/webhooks/${id}`, {
      eventName: "user.created",
      targetUrl: own.url,
      ed25519: false,
    });
    expect(off.json()).toMatchObject({ ed25519PublicKey: null });
  });

  it("verifies 1,000 deliveries across a secret rotation with the official library: both secrets sign during the overlap", async () => {
    const old = `whsec_${randomBytes(32).toString("base64")}`;
    const { own, sub } = await ownSubscription("user.updated", old);
    for (let n = 0; n < 500; n++) await events.publish("user.updated", null, { n });
    const rotated = await asOperator("POST", `/api/webhooks/${sub.id}/secret/rotate`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.headers["cache-control"]).toBe("no-store");
    const { secret: fresh, previousSecretExpiresAtUtc } = rotated.json<{
      secret: string;
      previousSecretExpiresAtUtc: string;
    }>();
    // The default overlap: a day.
    expect(Date.parse(previousSecretExpiresAtUtc) - Date.now()).toBeGreaterThan(86_400_000 - 60_000);
    for (let n = 500; n < 1_000; n++) await events.publish("user.updated", null, { n });
    await own.waitFor(1_000, 60_000);

    const byOld = new Webhook(old);
    const byNew = new Webhook(fresh);
    let signedTwice = 0;
    for (const r of own.received) {
      const headers = r.headers as Record<string, string>;
      const n = (JSON.parse(r.body) as { data: { n: number } }).data.n;
      // A receiver still holding the old secret verifies every delivery of the overlap.
      expect(byOld.verify(r.body, headers)).toMatchObject({ data: { n } });
      if (headers["webhook-signature"]?.includes(" ")) {
        signedTwice++;
        // One that has the new secret verifies every delivery made since the rotation; so does ours.
        expect(byNew.verify(r.body, headers)).toMatchObject({ data: { n } });
        expect(await verify(fresh, r.body, headers["x-svc-signature"] as string)).toBe(true);
      } else {
        expect(() => byNew.verify(r.body, headers)).toThrow("No matching signature");
      }
      // Every event published after the rotation was signed with both.
      if (n >= 500) expect(headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    }
    expect(signedTwice).toBeGreaterThanOrEqual(500);
    expect(new Set(own.received.map((r) => JSON.parse(r.body).data.n)).size).toBe(1_000);

    // A rotation without overlap: the old secrets verify nothing from then on.
    const last = (await asOperator("POST", `/api/webhooks/${sub.id}/secret/rotate?overlapSeconds=0`)).json<{
      secret: string;
      previousSecretExpiresAtUtc: string | null;
    }>();
    expect(last.previousSecretExpiresAtUtc).toBeNull();
    await events.publish("user.updated", null, { n: 1_000 });
    await own.waitFor(1_001);
    const after = own.received.at(-1) as Received;
    const afterHeaders = after.headers as Record<string, string>;
    expect(afterHeaders["webhook-signature"]?.split(" ")).toHaveLength(1);
    expect(new Webhook(last.secret).verify(after.body, afterHeaders)).toMatchObject({ data: { n: 1_000 } });
    for (const stale of [byOld, byNew])
      expect(() => stale.verify(after.body, afterHeaders)).toThrow("No matching signature");
    // Neither secret is in a listing, and another's subscription cannot be rotated.
    const listed = (await asOperator("GET", "/api/webhooks")).text;
    for (const s of [old, fresh, last.secret]) expect(listed).not.toContain(s.slice(6));
    expect((await asOperator("POST", `/api/webhooks/${crypto.randomUUID()}/secret/rotate`)).status).toBe(404);
  });

  it("refuses a whsec_ secret that is not the base64 of 24 to 64 bytes", async () => {
    for (const secret of [`whsec_${randomBytes(8).toString("base64")}`, "whsec_!!"]) {
      const answer = await asOperator("POST", "/api/webhooks", {
        eventName: "user.created",
        targetUrl: receiver.url,
        secret,
      });
      expect(answer.status).toBe(400);
      expect(answer.json()).toMatchObject({ errors: [{ field: "/body/secret" }] });
    }
  });

  it("matches by workspace scope: a workspace subscription ignores other workspaces' events", async () => {
    await subscribe({ eventName: "user.updated", workspaceKey: "acme" });
    await events.publish("user.updated", "other", { n: 1 });
    await events.publish("user.updated", "acme", { n: 2 });
    await receiver.waitFor(1);
    // Events are matched in the order they were published: the other workspace's, first, made no job.
    expect(await db.one(sql`SELECT count(*)::int AS n FROM job_reaper.jobs`)).toEqual({ n: 1 });
    expect(receiver.received.map((r) => JSON.parse(r.body).data.n)).toEqual([2]);
  });

  it("drops an event holding NUL or a lone surrogate without holding back the others", async () => {
    await subscribe({ eventName: "user.created" });
    await events.publish("user.created", null, { name: "a\u0000b" });
    await events.publish("user.created", null, { name: "x\ud800y" });
    await events.publish("user.created", null, { name: "fine" });
    await receiver.waitFor(1);
    await until(async () => (await onlyJob()).status === "Succeeded");
    expect(JSON.parse(receiver.received[0]?.body ?? "{}").data).toEqual({ name: "fine" });
    expect(receiver.received).toHaveLength(1);
  });

  it("keeps the delivery id across attempts and completes on the first 2xx (waits for the write-back)", async () => {
    await subscribe({ eventName: "user.deleted" });
    // Attempt 1: three tries, all 503 (two transport retries); attempt 2: 503, then 204.
    let calls = 0;
    receiver.respond = () => ({ status: ++calls < 5 ? 503 : 204 });
    await events.publish("user.deleted", null, { userId: "u2" });
    await retryNow(1);
    await until(async () => (await onlyJob()).status === "Succeeded");
    expect(await onlyJob()).toMatchObject({ status: "Succeeded", attempts: 2 });
    expect(receiver.received).toHaveLength(5);
    const ids = new Set(receiver.received.map((r) => r.headers["x-svc-delivery"]));
    expect(ids.size).toBe(1);
  });

  it("retries 408, 429 and 5xx twice inside one attempt with a short backoff", async () => {
    await subscribe({ eventName: "user.deleted" });
    const answers = [408, 429, 200];
    receiver.respond = () => ({ status: answers[receiver.received.length - 1] ?? 200 });
    await events.publish("user.deleted", null, { userId: "u4" });
    await until(async () => (await onlyJob()).status === "Succeeded");
    // One attempt, three requests, the same delivery id, with a backoff between them.
    expect(await onlyJob()).toMatchObject({ attempts: 1 });
    expect(receiver.received).toHaveLength(3);
    expect(new Set(receiver.received.map((r) => r.headers["x-svc-delivery"])).size).toBe(1);
    expect(new Set(receiver.received.map((r) => r.headers["webhook-id"])).size).toBe(1);
    const [a, b, c] = receiver.received.map((r) => r.at) as [number, number, number];
    expect(b - a).toBeGreaterThanOrEqual(90);
    expect(c - b).toBeGreaterThanOrEqual(290);
  });

  it("does not retry a 4xx other than 408 and 429 inside the attempt", async () => {
    await subscribe({ eventName: "user.deleted" });
    receiver.respond = () => ({ status: 404 });
    await events.publish("user.deleted", null, { userId: "u5" });
    await until(async () => (await onlyJob()).status === "Pending" && (await onlyJob()).attempts === 1);
    // The attempt's log (written after the job's write-back) says what the dispatcher saw: one 404 answer,
    // not a timeout or a refused connection.
    // This job's delivery only: the last test's log rows may still be on their way.
    const logged = () =>
      db.any(sql`
        SELECT outcome, status_code, error FROM webhook_dispatcher.delivery_attempts
        WHERE delivery_id = (SELECT (payload->>'deliveryId')::uuid FROM job_reaper.jobs)`);
    expect(await eventually(logged, (rows) => rows.length > 0)).toEqual([
      { outcome: "failed", status_code: 404, error: "receiver answered 404" },
    ]);
    expect(receiver.received).toHaveLength(1);
  });

  it("turns a subscription off when its receiver answers 410 Gone, and says so once with webhook.disabled", async () => {
    const gone = await subscribedReceiver("user.created");
    gone.respond = () => ({ status: 410 });
    const told = await subscribedReceiver("webhook.disabled");
    const id = (await asOperator("GET", "/api/webhooks"))
      .json<{
        items: Array<{ id: string; eventName: string }>;
      }>()
      .items.find((s) => s.eventName === "user.created")?.id;
    // Two deliveries in flight for the same subscription: it is turned off once, announced once.
    await events.publish("user.created", "acme", { userId: "u-gone-1" });
    await events.publish("user.created", "acme", { userId: "u-gone-2" });
    await told.waitFor(1, 15_000);
    const announced = JSON.parse((told.received[0] as Received).body) as {
      workspaceKey: string | null;
      data: { subscriptionId: string; origin: string; reason: string };
    };
    expect(announced.data).toMatchObject({
      subscriptionId: id,
      origin: new URL(gone.url).origin,
      reason: "the receiver answered 410 Gone",
    });
    const listed = (await asOperator("GET", "/api/webhooks")).json<{
      items: Array<{ id: string; isActive: boolean }>;
    }>();
    expect(listed.items.find((s) => s.id === id)?.isActive).toBe(false);
    await until(() => disabledAnnounced(id as string));
    // The delivery that met the 410 is a dead letter with the reason; the other is skipped, not sent.
    await until(async () => {
      const jobs = await db.any<{ status: string }>(
        sql`SELECT status FROM job_reaper.jobs WHERE payload->>'subscriptionId' = ${id}`,
      );
      return jobs.length === 2 && jobs.every((j) => j.status !== "Pending" && j.status !== "Running");
    });
    const dead = await db.any<{ last_error: string }>(
      sql`SELECT last_error FROM job_reaper.jobs
          WHERE payload->>'subscriptionId' = ${id} AND status = 'Failed'`,
    );
    expect(dead.length).toBeGreaterThanOrEqual(1);
    expect(dead[0]?.last_error).toContain("410 (Gone): the subscription is turned off");
    expect(gone.received.length).toBeLessThanOrEqual(2);
    // Later events reach it no more (a second subscriber to them is the signal that they went out);
    // webhook.disabled came once.
    const witness = await subscribedReceiver("user.created");
    await events.publish("user.created", "acme", { userId: "u-gone-3" });
    await witness.waitFor(1, 15_000);
    expect(gone.received.map((r) => JSON.parse(r.body).data.userId)).not.toContain("u-gone-3");
    expect(told.received).toHaveLength(1);
  });

  it("announces a 410's webhook.disabled that a crash left untold, with the same event id", async () => {
    const gone = await subscribedReceiver("user.created");
    const told = await subscribedReceiver("webhook.disabled");
    const { id } = await db.one<{ id: string }>(
      sql`SELECT id FROM webhook_dispatcher.subscriptions WHERE target_url = ${gone.url}`,
    );
    // As a crash between the change and its event leaves it: off by a 410, not announced, and the
    // delivery that met the 410 queued again once its lease expired.
    await db.query(sql`
      UPDATE webhook_dispatcher.subscriptions
      SET is_active = false, disabled_at = now(), disabled_announced = false WHERE id = ${id}`);
    await enqueue(db, deliverJob, {
      subscriptionId: id,
      deliveryId: "00000000-0000-4000-8000-000000000031",
      eventId: "00000000-0000-4000-8000-000000000032",
      event: "user.created",
      workspaceKey: "acme",
      occurredAtUtc: new Date().toISOString(),
      data: { userId: "u-untold" },
    });
    await told.waitFor(1, 15_000);
    expect(JSON.parse((told.received[0] as Received).body).data.subscriptionId).toBe(id);
    expect(gone.received).toHaveLength(0);
    // Marked told once published (just after: the event may arrive first).
    await until(() => disabledAnnounced(id));
  });

  it("stops a message's retries when its receiver answers webhook-delivery: abort-message", async () => {
    const own = await subscribedReceiver("user.created");
    own.respond = () => ({ status: 503, headers: { "webhook-delivery": "Abort-Message" } });
    await events.publish("user.created", null, { userId: "u-abort" });
    await until(async () => (await onlyJob()).status === "Failed");
    // One request: no retry inside the attempt, no second attempt; the reason is kept.
    expect(await onlyJob()).toMatchObject({ attempts: 1 });
    expect((await onlyJob()).last_error).toContain("abort-message");
    expect(own.received).toHaveLength(1);
  });

  it("waits a throttling receiver's Retry-After (429, 503) without spending an attempt", async () => {
    const own = await subscribedReceiver("user.created");
    own.respond = () => ({ status: 503, headers: { "retry-after": "120" } });
    await events.publish("user.created", null, {});
    await own.waitFor(1);
    const pending = () =>
      db.one<{ attempts: number; status: string; delay_ms: number; last_error: string | null }>(
        sql`SELECT attempts, status, last_error,
                   (extract(epoch FROM run_at - now()) * 1000)::int AS delay_ms
            FROM job_reaper.jobs`,
      );
    await until(async () => (await pending()).delay_ms > 60_000);
    const deferred = await pending();
    // 120 s, not the 30 s (±10 %) of the first backoff step; and the attempt is given back.
    expect(deferred).toMatchObject({ status: "Pending", attempts: 0 });
    expect(deferred.delay_ms).toBeGreaterThan(115_000);
    expect(deferred.delay_ms).toBeLessThanOrEqual(120_000);
    // A Retry-After longer than the short backoff ends the attempt: no transport retry.
    expect(own.received).toHaveLength(1);
    // 429 too; then the receiver takes it: one attempt spent in all.
    own.respond = () =>
      own.received.length === 2 ? { status: 429, headers: { "retry-after": "1" } } : { status: 200 };
    await hurry();
    await until(async () => (await onlyJob()).status === "Succeeded", 15_000);
    expect(await onlyJob()).toMatchObject({ attempts: 1 });
    expect(own.received).toHaveLength(3);
  });

  it("spends attempts on Retry-After answers a day after the event, so the delivery still ends", async () => {
    const own = await subscribedReceiver("user.created");
    own.respond = () => ({ status: 429, headers: { "retry-after": "120" } });
    const subscriptionId = (
      await db.one<{ id: string }>(
        sql`SELECT id FROM webhook_dispatcher.subscriptions WHERE target_url = ${own.url}`,
      )
    ).id;
    await enqueue(db, deliverJob, {
      subscriptionId,
      deliveryId: "00000000-0000-4000-8000-000000000021",
      eventId: "00000000-0000-4000-8000-000000000022",
      event: "user.created",
      workspaceKey: null,
      occurredAtUtc: new Date(Date.now() - 25 * 3_600_000).toISOString(),
      data: {},
    });
    await own.waitFor(1);
    await until(async () => (await onlyJob()).status === "Pending" && (await onlyJob()).attempts === 1);
    expect((await onlyJob()).last_error).toContain("receiver answered 429");
  });

  it("dead-letters after 5 failed attempts of 3 tries each (waits for the write-back)", async () => {
    // A receiver of its own: the circuit is per receiver, and earlier tests' failures must not count.
    const { own, sub } = await ownSubscription("user.deleted");
    own.respond = () => ({ status: 500 });
    await events.publish("user.deleted", null, { userId: "u3" });
    for (let n = 1; n <= 4; n++) {
      // Between attempts the circuit may open (threshold 3): let it pass before the retry is due.
      await retryNow(n, n >= 3 ? sub.id : undefined);
    }
    await until(async () => (await onlyJob()).status === "Failed", 15_000);
    expect(await onlyJob()).toMatchObject({ attempts: 5, last_error: expect.stringContaining("500") });
    // Up to 5 × 3 arrivals of one event.
    expect(own.received).toHaveLength(15);
    expect(new Set(own.received.map((r) => r.headers["x-svc-delivery"])).size).toBe(1);
    await own.stop();
  }, 40_000);

  it("opens the receiver's circuit after repeated failures and closes it after a successful trial", async () => {
    // A receiver of its own: circuits are per receiver, and the previous tests' failures are not its.
    const { own, sub } = await ownSubscription("user.created");
    own.respond = () => ({ status: 500 });
    const before = {
      failed: await sample("svc_webhook_deliveries_total", { outcome: "failed" }),
      deferred: await sample("svc_webhook_deliveries_total", { outcome: "deferred" }),
      delivered: await sample("svc_webhook_deliveries_total", { outcome: "delivered" }),
      timed: await sample("svc_webhook_delivery_duration_seconds", { outcome: "failed", le: "+Inf" }),
      circuits: await circuitsNotClosed(),
    };
    for (let i = 0; i < 3; i++) await events.publish("user.created", null, { i });
    // Three failed attempts (three tries each), each recorded by the breaker before it was written back.
    await until(
      async () =>
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status = 'Pending' AND attempts = 1`,
          )
        ).n === 3,
    );
    expect(own.received).toHaveLength(9);
    // Open: further deliveries fail without calling the receiver.
    await hurry();
    await events.publish("user.created", null, { i: 3 });
    await until(
      async () =>
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE last_error LIKE '%circuit open%'`,
          )
        ).n >= 1,
    );
    expect(own.received).toHaveLength(9);
    const blocked = await db.any<{ last_error: string }>(
      sql`SELECT last_error FROM job_reaper.jobs WHERE last_error LIKE '%circuit open%'`,
    );
    expect(blocked.length).toBeGreaterThan(0);
    // The metrics say so: three failed attempts (timed), a deferred one, and one more circuit not closed.
    expect(await sample("svc_webhook_deliveries_total", { outcome: "failed" })).toBe(before.failed + 3);
    expect(await sample("svc_webhook_delivery_duration_seconds", { outcome: "failed", le: "+Inf" })).toBe(
      before.timed + 3,
    );
    expect(await sample("svc_webhook_deliveries_total", { outcome: "deferred" })).toBeGreaterThan(
      before.deferred,
    );
    // The gauge counts every receiver's circuit; an earlier test's receiver's may open meanwhile (CI saw
    // +2 once), so it is at least this one more, and the API below shows this receiver's circuit is it.
    const whileOpen = await circuitsNotClosed();
    expect(whileOpen).toBeGreaterThanOrEqual(before.circuits + 1);
    // And the API: the subscription's receiver's circuit, open (or half-open once its time is up).
    const subId = sub.id;
    const circuit = async () =>
      (await asOperator("GET", `/api/webhooks/${subId}/circuit`)).json<{
        origin: string;
        state: string;
        consecutiveFailures: number;
        openUntilUtc: string | null;
        threshold: number;
      }>();
    const opened = await circuit();
    expect(opened).toMatchObject({ origin: new URL(own.url).origin, threshold: 3 });
    expect(opened.consecutiveFailures).toBeGreaterThanOrEqual(3);
    expect(["open", "half_open"]).toContain(opened.state);
    if (opened.state === "open")
      expect(Date.parse(opened.openUntilUtc as string)).toBeGreaterThan(Date.now() - 1_000);
    const other = await mintToken({
      scope: "workspace",
      workspaceKey: "other",
      permissions: ["webhook.read"],
    });
    expect((await api("GET", `/api/webhooks/${subId}/circuit`, other)).status).toBe(404);
    // After the open period a trial goes through; success closes the circuit and the rest follow.
    own.respond = () => ({ status: 200 });
    await until(async () => {
      await hurry();
      return (
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status = 'Succeeded'`,
          )
        ).n === 4
      );
    }, 10_000);
    expect(await sample("svc_webhook_deliveries_total", { outcome: "delivered" })).toBe(before.delivered + 4);
    // One circuit fewer than while it was open (others' circuits, as above, are not this test's to count).
    expect(await circuitsNotClosed()).toBeLessThanOrEqual(whileOpen - 1);
    expect(await circuit()).toMatchObject({ state: "closed", consecutiveFailures: 0, openUntilUtc: null });
    await own.stop();
  }, 20_000);

  it("keeps circuits per workspace: one tenant's failing endpoint does not pause another's deliveries to the same origin", async () => {
    const own = await subscribedReceiver("user.updated");
    // The failing one is workspace `wa`'s; `wb` subscribes to another path of the same origin.
    await db.query(
      sql`UPDATE webhook_dispatcher.subscriptions SET workspace_key = 'wa', target_url = ${`${own.url}/a`}`,
    );
    await subscribe({ eventName: "user.updated", targetUrl: `${own.url}/b`, workspaceKey: "wb" });
    own.respond = (request) => ({ status: request.url.endsWith("/a") ? 500 : 200 });
    for (let i = 0; i < 3; i++) await events.publish("user.updated", "wa", { i });
    const count = async (where: ReturnType<typeof sql>) =>
      (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE ${where}`)).n;
    // Three failed attempts open wa's circuit for this origin.
    await until(async () => (await count(sql`status = 'Pending' AND attempts = 1`)) === 3);
    await hurry();
    await events.publish("user.updated", "wa", { i: 3 });
    await until(async () => (await count(sql`last_error LIKE 'circuit open for wa %'`)) >= 1);
    // wb's delivery to the same origin goes through.
    await events.publish("user.updated", "wb", { i: 4 });
    await until(async () => own.received.some((r) => r.url.endsWith("/b")), 10_000);
    expect(await count(sql`last_error LIKE 'circuit open for wb %'`)).toBe(0);
    await own.stop();
  }, 30_000);

  it("an open circuit defers deliveries without spending attempts, and half-open lets one trial through", async () => {
    const own = await subscribedReceiver("user.created");
    own.respond = () => ({ status: 500 });
    for (let i = 0; i < 3; i++) await events.publish("user.created", null, { i });
    const count = async (where: ReturnType<typeof sql>) =>
      (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE ${where}`)).n;
    await until(async () => (await count(sql`status = 'Pending' AND attempts = 1`)) === 3);
    // Open. Five more events, and the first three made due: all deferred, no request, no attempt spent.
    for (let i = 3; i < 8; i++) await events.publish("user.created", null, { i });
    await hurry();
    await until(async () => (await count(sql`last_error LIKE 'circuit open%'`)) === 8);
    expect(own.received).toHaveLength(9);
    expect(await count(sql`attempts = 0`)).toBe(5);
    expect(await count(sql`attempts = 1`)).toBe(3);
    // Half-open after 3 s: one trial request, which fails and opens the circuit again.
    const before = own.received.length;
    await own.waitFor(before + 3, 10_000);
    // The trial (one attempt of three tries) is written back as failed; the circuit is open again.
    await until(async () => (await count(sql`status = 'Pending' AND last_error LIKE '%answered 500'`)) === 1);
    expect(own.received.length - before).toBe(3);
    // The next trial succeeds and the rest follow, each delivered once.
    own.respond = () => ({ status: 200 });
    await until(async () => {
      // The failed trial's own retry follows the backoff: made due here.
      await db.query(
        sql`UPDATE job_reaper.jobs SET run_at = now() WHERE status = 'Pending' AND last_error LIKE '%answered 500'`,
      );
      return (await count(sql`status = 'Succeeded'`)) === 8;
    }, 15_000);
    // Deferrals spent nothing: the five later events were sent once each (attempt 1), but for the one that
    // may have owned the failed trial; the first three spent their failed attempt, the trial's owner one more.
    expect(await count(sql`attempts > 3`)).toBe(0);
    expect(await count(sql`attempts = 1`)).toBeGreaterThanOrEqual(4);
  }, 30_000);

  it("counts a delivery the platform could not prepare as an error, without calling the receiver", async () => {
    const own = await subscribedReceiver("user.created");
    // A secret that no longer opens (a changed encryption key, a damaged row).
    await db.query(sql`UPDATE webhook_dispatcher.subscriptions SET secret_encrypted = 'not.a.secret'`);
    const before = {
      error: await sample("svc_webhook_deliveries_total", { outcome: "error" }),
      failed: await sample("svc_webhook_deliveries_total", { outcome: "failed" }),
    };
    await events.publish("user.created", null, { i: 1 });
    await until(async () => {
      const job = await onlyJob();
      return job.status === "Pending" && job.attempts === 1;
    }, 15_000);
    expect(own.received).toHaveLength(0);
    expect(await sample("svc_webhook_deliveries_total", { outcome: "error" })).toBe(before.error + 1);
    expect(await sample("svc_webhook_deliveries_total", { outcome: "failed" })).toBe(before.failed);
  });

  it("delivers nothing for a disabled or deleted subscription's queued job", async () => {
    const sub = await subscribe({ eventName: "user.created" });
    expect(
      (await asOperator("PUT", `/api/webhooks/${sub.id}/activation?isActive=false`)).json(),
    ).toMatchObject({
      isActive: false,
    });
    const queued = {
      subscriptionId: sub.id,
      eventId: "e1",
      event: "user.created",
      workspaceKey: null,
      occurredAtUtc: new Date().toISOString(),
      data: {},
    };
    await enqueue(db, deliverJob, { ...queued, deliveryId: "00000000-0000-4000-8000-000000000011" });
    expect((await asOperator("DELETE", `/api/webhooks/${sub.id}`)).status).toBe(204);
    await enqueue(db, deliverJob, { ...queued, deliveryId: "00000000-0000-4000-8000-000000000012" });
    await until(
      async () =>
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status = 'Succeeded'`,
          )
        ).n === 2,
    );
    // And events published while disabled produce no job at all.
    const other = await subscribe({ eventName: "user.updated" });
    await asOperator("PUT", `/api/webhooks/${other.id}/activation?isActive=false`);
    await subscribe({ eventName: "user.deleted" });
    await events.publish("user.updated", null, {});
    // Published after it and matched after it: once this one is delivered, the other was matched too.
    await events.publish("user.deleted", null, {});
    await receiver.waitFor(1);
    expect(receiver.received.map((r) => r.headers["x-svc-event"])).toEqual(["user.deleted"]);
    expect(
      await db.one(
        sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE payload->>'subscriptionId' = ${other.id}`,
      ),
    ).toEqual({ n: 0 });
  });

  it("turned on again, a subscription starts from the current events: a retry queued before is not sent, unless resent", async () => {
    const own = new Receiver();
    await own.start();
    ownReceivers.push(own);
    own.respond = () => ({ status: 500 });
    const sub = (
      await asOperator("POST", "/api/webhooks", {
        eventName: "user.updated",
        targetUrl: own.url,
        secret: "s",
      })
    ).json<{ id: string }>();
    await events.publish("user.updated", null, { n: 1 });
    // The first attempt failed (three tries): its retry waits in the queue.
    await until(async () => {
      const job = await onlyJob();
      return job.status === "Pending" && job.attempts === 1;
    }, 15_000);
    // The delivery log is written in batches, a moment after the attempt.
    let stale: { delivery_id: string } | null = null;
    await until(async () => {
      stale = await db.maybeOne<{ delivery_id: string }>(
        sql`SELECT delivery_id FROM webhook_dispatcher.deliveries WHERE subscription_id = ${sub.id}`,
      );
      return stale !== null;
    });
    const { delivery_id: staleId } = stale as unknown as { delivery_id: string };
    await asOperator("PUT", `/api/webhooks/${sub.id}/activation?isActive=false`);
    own.respond = () => ({ status: 200 });
    const resumed = await asOperator("PUT", `/api/webhooks/${sub.id}/activation?isActive=true`);
    expect(resumed.json()).toMatchObject({ isActive: true });
    // The retry comes due now: the event came before the subscription was turned on again.
    await hurry();
    await until(async () => (await onlyJob()).status === "Succeeded", 15_000);
    // Only the first attempt's three tries reached the receiver: the retry was not sent.
    expect(own.received).toHaveLength(3);
    const before = own.received.length;
    await events.publish("user.updated", null, { n: 2 });
    await own.waitFor(before + 1);
    const sent = (from: number) =>
      own.received.slice(from).map((r) => (JSON.parse(r.body) as { data: { n: number } }).data.n);
    expect(sent(before)).toEqual([2]);
    const log = await asOperator("GET", `/api/webhooks/${sub.id}/deliveries/${staleId}`);
    expect(log.json()).toMatchObject({ status: "failed" });
    // An operator who wants it anyway resends it.
    const resend = await asOperator("POST", `/api/webhooks/${sub.id}/deliveries/${staleId}/resend`);
    expect(resend.status, resend.text).toBe(202);
    await own.waitFor(before + 2);
    expect(sent(before)).toEqual([2, 1]);
  });

  it("sends a subscription's custom headers with every delivery, and shows their names only", async () => {
    const own = new Receiver();
    await own.start();
    ownReceivers.push(own);
    const made = await asOperator("POST", "/api/webhooks", {
      eventName: "user.updated",
      targetUrl: own.url,
      secret: "s",
      headers: { Authorization: "Bearer receiver-key", "X-Route": "crm" },
    });
    expect(made.status, made.text).toBe(201);
    expect(made.json()).toMatchObject({ headerNames: ["Authorization", "X-Route"] });
    const listed = await asOperator("GET", "/api/webhooks");
    expect(listed.text).not.toContain("receiver-key");
    await events.publish("user.updated", null, { n: 1 });
    await own.waitFor(1);
    const got = own.received[0]?.headers ?? {};
    expect(got).toMatchObject({ authorization: "Bearer receiver-key", "x-route": "crm" });
    // The platform's own headers are still there, and still its own.
    expect(await verify("s", own.received[0]?.body ?? "", got["x-svc-signature"] as string)).toBe(true);
    // Pointed at another receiver without its headers given again: the old receiver's credentials stay
    // behind (the next delivery there carries none).
    const other = new Receiver();
    await other.start();
    ownReceivers.push(other);
    const id = made.json<{ id: string }>().id;
    const moved = await asOperator("PUT", `/api/webhooks/${id}`, {
      eventName: "user.updated",
      targetUrl: other.url,
    });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.json()).toMatchObject({ headerNames: [] });
    await events.publish("user.updated", null, { n: 2 });
    await other.waitFor(1);
    expect(other.received[0]?.headers.authorization).toBeUndefined();
    const forged = await asOperator("POST", "/api/webhooks", {
      eventName: "user.updated",
      targetUrl: own.url,
      secret: "s",
      headers: { "X-Svc-Signature": "sha256=00" },
    });
    expect(forged.status).toBe(400);
  });

  it("follows a subscription's replaced settings: its new event, its new target, its new secret", async () => {
    const before = await subscribedReceiver("user.updated");
    const after = new Receiver();
    await after.start();
    ownReceivers.push(after);
    const sub = (
      await asOperator("POST", "/api/webhooks", {
        eventName: "user.updated",
        targetUrl: before.url,
        secret: "s3cret-value",
        description: "the CRM",
      })
    ).json<{ id: string; description: string }>();
    expect(sub.description).toBe("the CRM");
    const replaced = await asOperator("PUT", `/api/webhooks/${sub.id}`, {
      eventName: "user.deleted",
      targetUrl: after.url,
      secret: "the new secret",
    });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.text).not.toContain("the new secret");
    expect(replaced.json()).toMatchObject({
      eventName: "user.deleted",
      targetUrl: after.url,
      description: "",
    });
    await events.publish("user.updated", null, { n: 1 });
    await events.publish("user.deleted", null, { n: 2 });
    await after.waitFor(1);
    // The other subscription of `before` got user.updated; the replaced one did not, and user.deleted
    // came to the new target, signed with the new secret.
    await before.waitFor(1);
    expect(before.received.map((r) => JSON.parse(r.body).data.n)).toEqual([1]);
    const [moved] = after.received;
    expect(JSON.parse(moved?.body ?? "{}").data).toEqual({ n: 2 });
    expect(
      await verify("the new secret", moved?.body ?? "", moved?.headers["x-svc-signature"] as string),
    ).toBe(true);
    // Refused like create: a private target, an unknown field; and another's id is a 404.
    const refused = await asOperator("PUT", `/api/webhooks/${sub.id}`, {
      eventName: "user.deleted",
      targetUrl: "http://10.1.2.3/hook",
      headers: { a: "b" },
    });
    expect(refused.status).toBe(400);
    expect(refused.headers["content-type"]).toContain("application/problem+json");
    const missing = await asOperator("PUT", `/api/webhooks/${crypto.randomUUID()}`, {
      eventName: "user.deleted",
      targetUrl: after.url,
    });
    expect(missing.status).toBe(404);
  });

  it("holds a subscription's throttlePerSecond across two dispatcher replicas, spending no attempt on the wait", async () => {
    const own = new Receiver();
    await own.start();
    ownReceivers.push(own);
    const refused = await asOperator("POST", "/api/webhooks", {
      eventName: "user.updated",
      targetUrl: own.url,
      secret: "s",
      throttlePerSecond: 0,
    });
    expect(refused.status).toBe(400);
    const created = await asOperator("POST", "/api/webhooks", {
      eventName: "user.updated",
      targetUrl: own.url,
      secret: "s",
      throttlePerSecond: 4,
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json()).toMatchObject({ throttlePerSecond: 4 });
    // A second replica claims deliveries too: the count is shared through NATS, not kept per process.
    const second = await h.start(webhookDispatcherService, env);
    try {
      for (let n = 0; n < 16; n++) await events.publish("user.updated", null, { n });
      await own.waitFor(16, 30_000);
    } finally {
      await second.stop();
    }
    // By the second each attempt started in (its webhook-timestamp): at most 4 are admitted a second, but the
    // stamp is taken after the admission's round trips to the bucket, so a stamped second holds its own
    // admissions and those of the second before that stamped late (on a loaded machine, all of them):
    // at most 8. Four seconds at least, as 16 at 4 a second need (two replicas counting alone: two).
    const perSecond = new Map<string, number>();
    for (const r of own.received) {
      const at = r.headers["webhook-timestamp"] as string;
      perSecond.set(at, (perSecond.get(at) ?? 0) + 1);
    }
    expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(2 * 4);
    const seconds = [...perSecond.keys()].map(Number);
    expect(Math.max(...seconds) - Math.min(...seconds)).toBeGreaterThanOrEqual(3);
    // Waiting for the throttle spent no attempt: every delivery went on its first.
    // (A job is written back Succeeded just after its receiver answered.)
    const attempts = await eventually(
      () =>
        db.any<{ attempts: number }>(
          sql`SELECT attempts FROM job_reaper.jobs WHERE type = 'webhook.deliver' AND status = 'Succeeded'`,
        ),
      (rows) => rows.length >= 16,
    );
    expect(attempts.length).toBe(16);
    expect(attempts.every((a) => a.attempts === 1)).toBe(true);
    // Taken off by a PUT that leaves it out.
    const put = await asOperator("PUT", `/api/webhooks/${created.json<{ id: string }>().id}`, {
      eventName: "user.updated",
      targetUrl: own.url,
    });
    expect(put.json()).toMatchObject({ throttlePerSecond: null });
  });

  /**
   * `count` receivers of the test's own and a subscription to `user.deleted` at the first, delivered to
   * once: the dispatcher then holds the subscription in memory.
   */
  async function deliveredSubscription(count: number): Promise<{ receivers: Receiver[]; id: string }> {
    const receivers = Array.from({ length: count }, () => new Receiver());
    for (const r of receivers) {
      await r.start();
      ownReceivers.push(r);
    }
    const first = receivers[0] as Receiver;
    const { id } = (
      await asOperator("POST", "/api/webhooks", {
        eventName: "user.deleted",
        targetUrl: first.url,
        secret: "s",
      })
    ).json<{ id: string }>();
    await events.publish("user.deleted", null, { n: 1 });
    await first.waitFor(1);
    return { receivers, id };
  }
  const changesHeard = () => sample("svc_webhook_subscription_changes_heard_total", {});

  it("reads a change it made through the API at its next delivery, without waiting for PostgreSQL's notification", async () => {
    const { receivers, id } = await deliveredSubscription(2);
    const [first, second] = receivers as [Receiver, Receiver];
    // No notification from here on: only the dispatcher's own write can make it read the row again.
    await db.query(sql`ALTER TABLE webhook_dispatcher.subscriptions DISABLE TRIGGER subscriptions_changed`);
    onTestFinished(async () => {
      await db.query(sql`ALTER TABLE webhook_dispatcher.subscriptions ENABLE TRIGGER subscriptions_changed`);
    });
    const heardBefore = await changesHeard();
    const moved = await asOperator("PUT", `/api/webhooks/${id}`, {
      eventName: "user.deleted",
      targetUrl: second.url,
    });
    expect(moved.status).toBe(200);
    await events.publish("user.deleted", null, { n: 2 });
    await second.waitFor(1);
    expect(first.received).toHaveLength(1);
    expect(await changesHeard()).toBe(heardBefore);
  });

  it("reads a subscription changed with plain SQL afresh, also when the change came while the dispatcher was not listening", async () => {
    const { receivers, id } = await deliveredSubscription(3);
    const [first, second, third] = receivers as [Receiver, Receiver, Receiver];
    const moveTo = (url: string) =>
      db.query(sql`UPDATE webhook_dispatcher.subscriptions SET target_url = ${url} WHERE id = ${id}`);
    // Changed behind the API's back: the trigger's notification drops the copy. A change counts for the
    // deliveries that start once the dispatcher has heard it (on a loaded machine, the listening
    // connection's backend can be scheduled after the event's whole way to a delivery).
    const heardBefore = await changesHeard();
    await moveTo(second.url);
    await until(async () => (await changesHeard()) > heardBefore);
    await events.publish("user.deleted", null, { n: 2 });
    await second.waitFor(1);
    // The listening connection is cut, and the change made before it is back goes unheard: the copies
    // are dropped when the connection is lost and again when it is back, so the change still counts.
    const listener = () =>
      db.maybeOne<{ pid: number }>(sql`
        SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'webhook-dispatcher-subscriptions'`);
    const cut = (await listener())?.pid;
    expect(cut).toBeDefined();
    await db.query(sql`SELECT pg_terminate_backend(${cut})`);
    await moveTo(third.url);
    await until(async () => ((await listener())?.pid ?? cut) !== cut, 10_000);
    await events.publish("user.deleted", null, { n: 3 });
    await third.waitFor(1);
    const got = (r: Receiver) => r.received.map((x) => JSON.parse(x.body).data.n as number);
    expect([got(first), got(second), got(third)]).toEqual([[1], [2], [3]]);
  });
  it("logs every attempt: the answer's status and first 4 KiB, the error, the next attempt, the masked payload", async () => {
    const { own, sub } = await ownSubscription("user.created");
    own.respond = () => ({ status: 500, body: `down for maintenance ${"x".repeat(10_000)}` });
    await events.publish("user.created", "acme", { userId: "u-log", email: "alice@example.com" });
    type Detail = {
      status: string;
      attempts: number;
      nextAttemptAtUtc: string | null;
      payload: { data: { email: string } } | null;
      history: Array<{
        attempt: number;
        outcome: string;
        statusCode: number | null;
        responseExcerpt: string | null;
        error: string | null;
        durationMs: number;
      }>;
    };
    const deliveries = async (query = "") =>
      (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries${query}`)).json<{
        items: Array<{ deliveryId: string; status: string; attempts: number; lastStatusCode: number | null }>;
        nextCursor: string | null;
      }>().items;
    // The first attempt failed (three tries inside it): the delivery is retrying, its next attempt due.
    await until(async () => (await deliveries())[0]?.status === "retrying", 15_000);
    const [first] = await deliveries();
    const deliveryId = first?.deliveryId as string;
    expect(first).toMatchObject({ attempts: 1, lastStatusCode: 500 });
    // The log records the attempt as it ends; the job's next run is written by the worker's next batch
    // of write-backs a moment later (until then the detail has no next attempt to show).
    const detailNow = async () =>
      (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries/${deliveryId}`)).json<Detail>();
    await until(async () => (await detailNow()).nextAttemptAtUtc !== null, 15_000);
    const retrying = await detailNow();
    expect(retrying.status).toBe("retrying");
    expect(Date.parse(retrying.nextAttemptAtUtc as string)).toBeGreaterThan(Date.now());

    own.respond = () => ({ status: 200, body: "thanks" });
    await retryNow(1);
    await until(async () => (await deliveries())[0]?.status === "delivered", 15_000);
    const detail = await asOperator("GET", `/api/webhooks/${sub.id}/deliveries/${deliveryId}`);
    expect(detail.status, detail.text).toBe(200);
    const d = detail.json<Detail>();
    expect(d).toMatchObject({ status: "delivered", attempts: 2, nextAttemptAtUtc: null });
    expect(d.history.map((a) => [a.attempt, a.outcome, a.statusCode, a.error])).toEqual([
      [1, "failed", 500, "receiver answered 500"],
      [2, "delivered", 200, null],
    ]);
    expect(d.history[0]?.responseExcerpt).toMatch(/^down for maintenance x+$/);
    expect(Buffer.byteLength(d.history[0]?.responseExcerpt ?? "")).toBe(4_096);
    expect(d.history[1]?.responseExcerpt).toBe("thanks");
    expect(d.history.every((a) => a.durationMs >= 0)).toBe(true);
    // The payload as sent: masked.
    expect(d.payload?.data.email).toBe("ali***om");
    expect(detail.text).not.toContain("alice@example.com");

    // Filters.
    expect(await deliveries("?status=delivered")).toHaveLength(1);
    expect(await deliveries("?status=failed")).toHaveLength(0);
    expect(await deliveries("?eventName=user.deleted")).toHaveLength(0);
    expect(await deliveries(`?since=${new Date(Date.now() + 60_000).toISOString()}`)).toHaveLength(0);
    expect(await deliveries(`?until=${new Date(Date.now() + 60_000).toISOString()}`)).toHaveLength(1);
    expect((await asOperator("GET", `/api/webhooks/${sub.id}/deliveries?status=gone`)).status).toBe(400);
    // Another workspace's session reads neither; an unknown delivery is a 404.
    const other = await mintToken({
      scope: "workspace",
      workspaceKey: "other",
      permissions: ["webhook.read"],
    });
    expect((await api("GET", `/api/webhooks/${sub.id}/deliveries`, other)).status).toBe(404);
    expect((await api("GET", `/api/webhooks/${sub.id}/deliveries/${deliveryId}`, other)).status).toBe(404);
    expect(
      (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries/${crypto.randomUUID()}`)).status,
    ).toBe(404);
  });

  it("sends a delivery again on request: the same webhook-id and data, to the subscription as it is now", async () => {
    const { own, sub } = await ownSubscription("user.created");
    own.respond = () => ({ status: 500 });
    await events.publish("user.created", null, { userId: "u-resend" });
    type Summary = { deliveryId: string; status: string; attempts: number };
    const deliveries = async () =>
      (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries`)).json<{ items: Summary[] }>().items;
    // While it waits for its next attempt, it is not sent again on request: 409.
    await until(async () => (await deliveries())[0]?.status === "retrying", 15_000);
    const deliveryId = (await deliveries())[0]?.deliveryId as string;
    expect((await asOperator("POST", `/api/webhooks/${sub.id}/deliveries/${deliveryId}/resend`)).status).toBe(
      409,
    );
    // The second attempt is refused for good (webhook-delivery: abort-message): failed.
    own.respond = () => ({ status: 400, headers: { "webhook-delivery": "abort-message" } });
    await retryNow(1);
    await until(async () => (await deliveries())[0]?.status === "failed", 15_000);

    // The receiver is mended; the operator sends it again.
    own.respond = () => ({ status: 200 });
    const resent = await asOperator("POST", `/api/webhooks/${sub.id}/deliveries/${deliveryId}/resend`);
    expect(resent.status, resent.text).toBe(202);
    expect(resent.json()).toEqual({ deliveryId, status: "retrying" });
    await until(async () => (await deliveries())[0]?.status === "delivered", 15_000);
    const sends = own.received.filter((r) => r.headers["webhook-id"] === deliveryId);
    // Three tries inside the first attempt (500 is retried), one for the abort, one for the resend.
    expect(sends).toHaveLength(5);
    expect(new Set(sends.map((r) => JSON.parse(r.body).data.userId))).toEqual(new Set(["u-resend"]));
    const detail = (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries/${deliveryId}`)).json<{
      attempts: number;
      history: Array<{ outcome: string; statusCode: number }>;
    }>();
    expect(detail.history.map((a) => [a.outcome, a.statusCode])).toEqual([
      ["failed", 500],
      ["failed", 400],
      ["delivered", 200],
    ]);
    expect(detail.attempts).toBe(3);

    // Turned off: 409; another workspace's session: 404; read-only rights: 403.
    await asOperator("PUT", `/api/webhooks/${sub.id}/activation?isActive=false`);
    expect((await asOperator("POST", `/api/webhooks/${sub.id}/deliveries/${deliveryId}/resend`)).status).toBe(
      409,
    );
    await asOperator("PUT", `/api/webhooks/${sub.id}/activation?isActive=true`);
    const other = await mintToken({
      scope: "workspace",
      workspaceKey: "other",
      permissions: ["webhook.manage"],
    });
    expect((await api("POST", `/api/webhooks/${sub.id}/deliveries/${deliveryId}/resend`, other)).status).toBe(
      404,
    );
    const reader = await mintToken({ scope: "platform", permissions: ["webhook.read"] });
    expect(
      (await api("POST", `/api/webhooks/${sub.id}/deliveries/${deliveryId}/resend`, reader)).status,
    ).toBe(403);
  });

  it("settles a retrying delivery whose job an operator cancelled: failed, no next attempt, and it may be resent", async () => {
    const began = new Date(Date.now() - 60_000);
    const { own, sub } = await ownSubscription("user.created");
    own.respond = () => ({ status: 500 });
    // The last one's subscription no route reads.
    const unread = await ownSubscription("user.deleted");
    unread.own.respond = () => ({ status: 500 });
    const users = ["u-read", "u-resent", "u-listed", "u-swept"];
    for (const userId of users)
      await events.publish(userId === "u-swept" ? "user.deleted" : "user.created", null, { userId });
    type Summary = { deliveryId: string; status: string };
    const deliveries = async (query = "") =>
      (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries${query}`)).json<{ items: Summary[] }>()
        .items;
    // Each delivery's first attempt failed and was written back: retrying, its job Pending.
    const pending = () =>
      db.any<{ id: string; user_id: string; delivery_id: string }>(sql`
        SELECT id::text, payload->'data'->>'userId' AS user_id, payload->>'deliveryId' AS delivery_id
        FROM job_reaper.jobs WHERE status = 'Pending' AND attempts = 1`);
    await until(async () => (await pending()).length === users.length, 15_000);
    await until(async () => (await deliveries("?status=retrying")).length === users.length - 1, 15_000);
    const jobs = new Map((await pending()).map((j) => [j.user_id, j]));
    // An operator cancels every job (what POST /api/jobs/{id}/cancel does): no attempt will follow.
    for (const job of jobs.values())
      expect(await cancelJob(db, job.id, undefined, "Cancelled by an operator.")).toMatchObject({
        job: { status: "Failed" },
      });
    const idOf = (userId: string) => jobs.get(userId)?.delivery_id as string;

    // Read on its own: failed, with no next attempt.
    const read = await asOperator("GET", `/api/webhooks/${sub.id}/deliveries/${idOf("u-read")}`);
    expect(read.json()).toMatchObject({ status: "failed", nextAttemptAtUtc: null });
    // Sent again on request (a 409 while it was shown waiting), and delivered.
    own.respond = () => ({ status: 200 });
    const resent = await asOperator("POST", `/api/webhooks/${sub.id}/deliveries/${idOf("u-resent")}/resend`);
    expect(resent.status, resent.text).toBe(202);
    // Listed: a page filtered on retrying no longer holds the settled ones.
    const stillWaiting = (await deliveries("?status=retrying")).map((d) => d.deliveryId);
    expect(stillWaiting).not.toContain(idOf("u-listed"));
    expect(stillWaiting).not.toContain(idOf("u-read"));
    expect((await deliveries()).find((d) => d.deliveryId === idOf("u-listed"))?.status).toBe("failed");
    await until(
      async () => (await deliveries()).find((d) => d.deliveryId === idOf("u-resent"))?.status === "delivered",
      15_000,
    );
    // The one no route read is settled by the dispatcher's housekeeping (at start, then hourly), which
    // reads the jobs that ended since its last pass: a pass from after this test's cancellations finds
    // nothing.
    expect(await settleAllStrandedDeliveries(db, new Date(Date.now() + 60_000))).toEqual([]);
    expect(await settleAllStrandedDeliveries(db, began)).toEqual([idOf("u-swept")]);
    const swept = await db.one<{ status: string }>(
      sql`SELECT status FROM webhook_dispatcher.deliveries WHERE delivery_id = ${idOf("u-swept")}`,
    );
    expect(swept.status).toBe("failed");
    expect(await settleAllStrandedDeliveries(db, began)).toEqual([]);
  });

  it("recovers a window's failed deliveries: one durable job pages through them, each sent again once", async () => {
    const { own, sub } = await ownSubscription("user.deleted");
    const since = new Date(Date.now() - 1_000).toISOString();
    // Three failed for good (more than a page: two a second here), one delivered.
    own.respond = (r) =>
      JSON.parse(r.body).data.n === "ok"
        ? { status: 200 }
        : { status: 400, headers: { "webhook-delivery": "abort-message" } };
    await events.publish("user.deleted", null, { n: "ok" });
    for (let n = 0; n < 3; n++) await events.publish("user.deleted", null, { n });
    const failed = async () =>
      (
        await db.one<{ n: number }>(sql`
          SELECT count(*)::int AS n FROM webhook_dispatcher.deliveries
          WHERE subscription_id = ${sub.id} AND status = 'failed'`)
      ).n;
    await until(async () => (await failed()) === 3, 20_000);

    own.respond = () => ({ status: 200 });
    const started = await asOperator(
      "POST",
      `/api/webhooks/${sub.id}/recover?since=${encodeURIComponent(since)}`,
    );
    expect(started.status, started.text).toBe(202);
    const recovery = started.json<{ recoveryId: string; status: string }>();
    expect(recovery.status).toBe("running");
    expect(started.headers.location).toBe(`/api/webhooks/${sub.id}/recoveries/${recovery.recoveryId}`);
    const progress = async () =>
      (await asOperator("GET", `/api/webhooks/${sub.id}/recoveries/${recovery.recoveryId}`)).json<{
        status: string;
        queued: number;
        finishedAtUtc: string | null;
      }>();
    await until(async () => (await progress()).status === "done", 20_000);
    expect(await progress()).toMatchObject({ queued: 3, finishedAtUtc: expect.any(String) });
    await until(
      async () =>
        (
          await db.one<{ n: number }>(sql`
            SELECT count(*)::int AS n FROM webhook_dispatcher.deliveries
            WHERE subscription_id = ${sub.id} AND status = 'delivered'`)
        ).n === 4,
      20_000,
    );
    // Each failed one sent once more (its abort, then the recovery), the delivered one never again.
    const sends = new Map<string, number>();
    for (const r of own.received) {
      const id = r.headers["webhook-id"] as string;
      sends.set(id, (sends.get(id) ?? 0) + 1);
    }
    expect([...sends.values()].sort()).toEqual([1, 2, 2, 2]);

    // Refused: an empty window, another workspace's subscription, a subscription turned off.
    const later = new Date(Date.now() + 60_000).toISOString();
    const empty = await asOperator(
      "POST",
      `/api/webhooks/${sub.id}/recover?since=${encodeURIComponent(later)}`,
    );
    expect(empty.status).toBe(400);
    const other = await mintToken({
      scope: "workspace",
      workspaceKey: "other",
      permissions: ["webhook.manage", "webhook.read"],
    });
    const q = `since=${encodeURIComponent(since)}`;
    expect((await api("POST", `/api/webhooks/${sub.id}/recover?${q}`, other)).status).toBe(404);
    expect(
      (await api("GET", `/api/webhooks/${sub.id}/recoveries/${recovery.recoveryId}`, other)).status,
    ).toBe(404);
    await asOperator("PUT", `/api/webhooks/${sub.id}/activation?isActive=false`);
    expect((await asOperator("POST", `/api/webhooks/${sub.id}/recover?${q}`)).status).toBe(409);
  }, 60_000);

  it("pages the delivery log newest first", async () => {
    const { own, sub } = await ownSubscription("user.deleted");
    for (let n = 0; n < 5; n++) await events.publish("user.deleted", null, { n });
    await own.waitFor(5);
    type Page = { items: Array<{ deliveryId: string; createdAtUtc: string }>; nextCursor: string | null };
    const all = async () =>
      (await asOperator("GET", `/api/webhooks/${sub.id}/deliveries`)).json<Page>().items;
    await until(async () => (await all()).length === 5, 10_000);
    const everything = await all();
    const times = everything.map((i) => Date.parse(i.createdAtUtc));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Page = (
        await asOperator(
          "GET",
          `/api/webhooks/${sub.id}/deliveries?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`,
        )
      ).json<Page>();
      seen.push(...page.items.map((i) => i.deliveryId));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(seen).toEqual(everything.map((i) => i.deliveryId));
  });

  it("forgets deliveries and attempts older than the log's days, in batches", async () => {
    const { own, sub } = await ownSubscription("user.updated");
    for (let n = 0; n < 3; n++) await events.publish("user.updated", null, { n });
    await own.waitFor(3);
    // This test's only (an earlier test's last entries may still be written meanwhile).
    const counts = async () =>
      db.one<{ deliveries: number; attempts: number }>(sql`
        SELECT (SELECT count(*)::int FROM webhook_dispatcher.deliveries
                WHERE subscription_id = ${sub.id}) AS deliveries,
               (SELECT count(*)::int FROM webhook_dispatcher.delivery_attempts a
                JOIN webhook_dispatcher.deliveries d USING (delivery_id)
                WHERE d.subscription_id = ${sub.id}) AS attempts`);
    await until(async () => (await counts()).attempts === 3, 10_000);
    // Two of them a month old.
    const old = await db.any<{ delivery_id: string }>(sql`
      SELECT delivery_id FROM webhook_dispatcher.deliveries WHERE subscription_id = ${sub.id}
      ORDER BY created_at LIMIT 2`);
    const ids = old.map((r) => r.delivery_id);
    await db.query(sql`
      UPDATE webhook_dispatcher.deliveries SET created_at = now() - interval '31 days',
        updated_at = now() - interval '31 days' WHERE delivery_id = ANY(${ids}::uuid[])`);
    await db.query(sql`
      UPDATE webhook_dispatcher.delivery_attempts SET attempted_at = now() - interval '31 days'
      WHERE delivery_id = ANY(${ids}::uuid[])`);
    // Its service stopping: one batch (an attempt and a delivery), and the rest left for the next sweep.
    expect(await sweepDeliveryLog(db, 30, { batch: 1, signal: AbortSignal.abort() })).toBe(2);
    // A batch of one at a time: the sweep goes on until nothing is left to remove.
    expect(await sweepDeliveryLog(db, 30, { batch: 1 })).toBe(2);
    // (the old ones' attempts went with them; counted through their deliveries, the young one is left)
    expect(await counts()).toEqual({ deliveries: 1, attempts: 1 });
    expect(
      await db.one(sql`
        SELECT count(*)::int AS n FROM webhook_dispatcher.delivery_attempts
        WHERE delivery_id = ANY(${ids}::uuid[])`),
    ).toEqual({ n: 0 });
  });

  it("has the log swept by a dispatcher as it starts, not only an hour later", async () => {
    const { own, sub } = await ownSubscription("user.updated");
    for (let n = 0; n < 2; n++) await events.publish("user.updated", null, { n });
    await own.waitFor(2);
    const deliveries = async () =>
      (
        await db.any<{ delivery_id: string }>(sql`
          SELECT delivery_id FROM webhook_dispatcher.deliveries
          WHERE subscription_id = ${sub.id} ORDER BY created_at`)
      ).map((r) => r.delivery_id);
    await until(async () => (await deliveries()).length === 2, 10_000);
    const [old, young] = await deliveries();
    await db.query(sql`
      UPDATE webhook_dispatcher.deliveries SET created_at = now() - interval '31 days',
        updated_at = now() - interval '31 days' WHERE delivery_id = ${old}::uuid`);
    // A replica starting (a restart, a rollout) sweeps at once.
    const second = await h.start(webhookDispatcherService, env);
    try {
      await until(async () => (await deliveries()).length === 1, 10_000);
      expect(await deliveries()).toEqual([young]);
    } finally {
      await second.stop();
    }
  });

  it("enqueues one delivery per event and subscription, even when the event is published twice", async () => {
    await subscribe({ eventName: "user.created" });
    await events.publish("user.created", null, { n: 1 }, { eventId: "fixed-event-id" });
    await events.publish("user.created", null, { n: 1 }, { eventId: "fixed-event-id" });
    // A later event: once it is delivered, both copies before it were matched.
    await events.publish("user.created", null, { n: 2 });
    await receiver.waitFor(2);
    expect(await db.one(sql`SELECT count(*)::int AS n FROM job_reaper.jobs`)).toEqual({ n: 2 });
    expect(receiver.received.map((r) => JSON.parse(r.body).data.n).sort()).toEqual([1, 2]);
  });
});
