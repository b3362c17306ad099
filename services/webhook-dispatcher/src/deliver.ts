/**
 * The `webhook.deliver` job: POST the envelope, signed with the subscription's secret, to its
 * target. A disabled or deleted subscription makes the job a no-op. Any 2xx completes the job; anything
 * else fails the attempt (the engine retries with backoff up to 5 attempts, then dead-letters it); a
 * receiver's Retry-After, when longer, sets the next attempt's time. Within an attempt the client retries
 * connection failures and 408/429/5xx answers twice (http-client.ts).
 */
import { createHmac } from "node:crypto";

import type { EventPublisher } from "@svc/bus";
import { publishPlatformEvent, type WorkspaceStates } from "@svc/contracts";
import { type Db, sql } from "@svc/db";
import { type ClaimedJob, DeferJobError, PermanentJobError, RetryLaterError } from "@svc/jobs";
import { injectContext, inSpan, type Span, SpanKind, tracingEnabled } from "@svc/observability";
import { StandardWebhookHeader, type WebhookDelivery, WebhookHeader } from "@svc/wire-contract";

import type { CircuitBreaker } from "./circuit-breaker.js";
import { type AttemptOutcome, type DeliveryLog, endWaitingDelivery } from "./delivery-log.js";
import { derivedUuid } from "./derived-uuid.js";
import { type DeliveryResponse, post, type TargetPolicy, TargetRefusedError } from "./http-client.js";
import type { DeliverPayload } from "./jobs.js";
import { maskPayload } from "./masking.js";
import type { DeliveryOutcome, WebhookMetrics } from "./metrics.js";
import type { SecretBox } from "./secrets.js";
import { asymmetricSignature, standardSignature } from "./standard-webhooks.js";
import type { SubscriptionCache } from "./subscription-cache.js";
import type { Throttle } from "./throttle.js";

/** What a POST to a receiver needs: deliveries and flows' http actions alike. */
export interface OutboundDeps {
  readonly secrets: SecretBox;
  readonly allowed: TargetPolicy;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  /** The current sensitive-field set (baseline and plugin-registered names). */
  readonly sensitiveFields: () => Promise<ReadonlySet<string>>;
  /** Whether a workspace is on and its tenant not suspended (the resolver's answer, cached). */
  readonly workspaces: Pick<WorkspaceStates, "state">;
  /** How long a delivery or flow run of a paused workspace waits before it looks again. */
  readonly pausedRetryMs: number;
  /** Makes every job waiting on `waitingOn` (a receiver's circuit) due now. */
  readonly wakeWaiting: (waitingOn: string) => Promise<unknown>;
}

/**
 * Operators' decisions stick: the deliveries and flow runs of a workspace an operator
 * turned off, or of a suspended tenant, wait (deferred, no attempt spent) until it is turned on or resumed.
 */
export async function deferWhilePaused(deps: OutboundDeps, workspaceKey: string | null): Promise<void> {
  if (workspaceKey === null) return;
  const state = await deps.workspaces.state(workspaceKey);
  if (state === "inactive" || state === "suspended") {
    throw new DeferJobError(
      state === "inactive"
        ? `workspace '${workspaceKey}' is turned off`
        : `the tenant of '${workspaceKey}' is suspended`,
      deps.pausedRetryMs,
    );
  }
}

/**
 * What a delivery writes besides its log: a subscription's health (failing since, turned off and
 * announced, healthy again) and a waiting delivery's end. The rules stay in the handler.
 */
export interface AttemptTables {
  /** Turns the subscription off when it is on: its row as turned off, or null when it was off already. */
  turnOff(subscriptionId: string, reason: string): Promise<DisabledRow | null>;
  /** Marks the turning off at `disabledAt` announced (a later one is announced again). */
  markAnnounced(subscriptionId: string, disabledAt: Date): Promise<void>;
  /**
   * A failed attempt: failing from now on unless it was already; `counting` adds one to the failures in a
   * row. Answers both as they are now.
   */
  noteFailing(
    subscriptionId: string,
    counting: boolean,
  ): Promise<{ readonly failingSince: Date; readonly failingAttempts: number }>;
  /** A delivered attempt of a failing subscription: healthy again. */
  markHealthy(subscriptionId: string): Promise<void>;
  /** A delivery the log shows waiting for an attempt that will not be sent: failed. */
  endWaiting(deliveryId: string): Promise<void>;
}

/** The subscription and delivery-log tables in PostgreSQL. */
export function attemptTables(db: Db): AttemptTables {
  return {
    turnOff: (subscriptionId, reason) =>
      db.maybeOne<DisabledRow>(sql`
        UPDATE webhook_dispatcher.subscriptions
        SET is_active = false, disabled_at = date_trunc('milliseconds', now()), disabled_announced = false,
            disabled_reason = ${reason}, updated_at = now()
        WHERE id = ${subscriptionId} AND is_active
        RETURNING workspace_key, target_url, disabled_at, disabled_reason`),
    markAnnounced: async (subscriptionId, disabledAt) => {
      await db.query(sql`
        UPDATE webhook_dispatcher.subscriptions SET disabled_announced = true
        WHERE id = ${subscriptionId} AND date_trunc('milliseconds', disabled_at) = ${disabledAt}`);
    },
    noteFailing: async (subscriptionId, counting) => {
      const row = await db.one<{ failing_since: Date; failing_attempts: number }>(sql`
        UPDATE webhook_dispatcher.subscriptions
        SET failing_since = coalesce(failing_since, now()),
            failing_attempts = failing_attempts + ${counting ? 1 : 0}
        WHERE id = ${subscriptionId} RETURNING failing_since, failing_attempts`);
      return { failingSince: row.failing_since, failingAttempts: row.failing_attempts };
    },
    markHealthy: async (subscriptionId) => {
      await db.query(sql`
        UPDATE webhook_dispatcher.subscriptions SET failing_since = NULL, failing_attempts = 0
        WHERE id = ${subscriptionId}`);
    },
    endWaiting: (deliveryId) => endWaitingDelivery(db, deliveryId),
  };
}

export interface DeliverDeps extends OutboundDeps {
  readonly tables: AttemptTables;
  /** Subscriptions' `throttlePerSecond`, counted across replicas. */
  readonly throttle: Pick<Throttle, "admit">;
  /** Subscriptions as they are now, by id (null: deleted). */
  readonly subscriptions: Pick<SubscriptionCache, "load">;
  readonly breaker: CircuitBreaker;
  /** Where each attempt that reached the receiver's address is written. */
  readonly deliveryLog: Pick<DeliveryLog, "record">;
  /** How long every delivery of a subscription may fail before it is turned off (0: never). */
  readonly disableAfterFailingMs: number;
  /** How many failed attempts in a row turn a subscription off (0: never). */
  readonly disableAfterFailures: number;
  readonly metrics: WebhookMetrics;
  /** Publishes the platform's own events (`webhook.disabled`). */
  readonly events: EventPublisher;
}

/** An event's data as a receiver sees it: masked unless it asked for sensitive data. */
export async function shownData(
  deps: OutboundDeps,
  data: unknown,
  includeSensitive: boolean,
): Promise<unknown> {
  return includeSensitive ? data : maskPayload(data, await deps.sensitiveFields());
}

/**
 * One attempt to POST a JSON body (up to two retries on a connection failure or a transient answer); a
 * target the outbound policy refuses fails for good (PermanentJobError).
 */
export async function postJson(
  deps: OutboundDeps,
  url: URL,
  body: Buffer,
  headers: Record<string, string>,
  retryAfter?: (r: DeliveryResponse) => number | undefined,
): Promise<DeliveryResponse> {
  const send = async (span?: Span) => {
    // The receiver continues the trace (W3C `traceparent`, with tracing on); the signature does not cover
    // headers, so it is unchanged.
    const sent = { ...headers };
    injectContext((name, value) => {
      sent[name] = value;
    });
    try {
      const response = await post(
        {
          url,
          body,
          headers: sent,
          timeoutMs: deps.timeoutMs,
          maxResponseBytes: deps.maxResponseBytes,
          allowed: deps.allowed,
        },
        2,
        retryAfter,
      );
      span?.setAttribute("http.response.status_code", response.status);
      return response;
    } catch (error) {
      if (error instanceof TargetRefusedError) throw new PermanentJobError(error.message);
      throw error;
    }
  };
  if (!tracingEnabled()) return send();
  // The URL's path and query can hold a receiver's token (incoming-webhook URLs carry it in the path):
  // the span names the host only.
  return inSpan(
    "webhook-dispatcher",
    "POST",
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "http.request.method": "POST",
        "server.address": url.hostname,
        "svc.service": "webhook-dispatcher",
      },
    },
    send,
  );
}

/**
 * A receiver that answers 410 Gone wants nothing more, and one that has failed every delivery for
 * `disableAfterFailingMs` is not coming back by itself: its subscription is turned off, once, and
 * `webhook.disabled` tells the operators why (rbac notifies the holders of `webhook.manage`). The event's
 * id comes from the subscription and the moment it was turned off, so announcing again after a crash (see
 * `announceDisabled`) adds no second event or notification.
 */
async function turnOff(deps: DeliverDeps, subscriptionId: string, reason: string): Promise<void> {
  const row = await deps.tables.turnOff(subscriptionId, reason);
  // Already off: another delivery turned it off first, or an operator did.
  if (row !== null) await announceDisabled(deps, subscriptionId, row);
}

export interface DisabledRow {
  workspace_key: string | null;
  target_url: string;
  disabled_at: Date;
  disabled_reason: string | null;
}

const GONE = "the receiver answered 410 Gone";

/** Publishes `webhook.disabled` for a subscription the dispatcher turned off, then marks it announced. */
async function announceDisabled(deps: DeliverDeps, subscriptionId: string, row: DisabledRow): Promise<void> {
  const eventId = derivedUuid(`${subscriptionId} ${row.disabled_at.toISOString()}`);
  await publishPlatformEvent(
    deps.events,
    "webhook.disabled",
    row.workspace_key,
    {
      subscriptionId,
      workspaceKey: row.workspace_key,
      origin: new URL(row.target_url).origin,
      reason: row.disabled_reason ?? GONE,
    },
    { eventId },
  );
  await deps.tables.markAnnounced(subscriptionId, row.disabled_at);
}

/**
 * A failed attempt: the subscription is failing from now on, unless it was already (one write, at the
 * first failure only); failing for longer than the setting allows, it is turned off.
 */
async function noteFailure(
  deps: DeliverDeps,
  subscriptionId: string,
  failingSince: Date | null,
): Promise<void> {
  const counting = deps.disableAfterFailures > 0;
  // One write at the first failure; with a count to reach, one at every failure.
  const row =
    failingSince !== null && !counting
      ? { failingSince, failingAttempts: 0 }
      : await deps.tables.noteFailing(subscriptionId, counting);
  if (counting && row.failingAttempts >= deps.disableAfterFailures) {
    await turnOff(deps, subscriptionId, `the last ${row.failingAttempts} delivery attempts failed`);
    return;
  }
  const limit = deps.disableAfterFailingMs;
  const since = row.failingSince;
  if (limit > 0 && Date.now() - since.getTime() >= limit) {
    const hours = Math.round((Date.now() - since.getTime()) / 360_000) / 10;
    await turnOff(deps, subscriptionId, `every delivery failed for ${hours} hours`);
  }
}

export function signature(secret: string, body: Buffer): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/** Retry-After as seconds or an HTTP date, in ms from now; undefined when absent or unparsable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** A circuit's key: the subscription's workspace (`platform` for a platform subscription) and the origin. */
export function receiverKey(workspaceKey: string | null, origin: string): string {
  return `${workspaceKey ?? "platform"} ${origin}`;
}

/** The workspace and origin of a circuit's key. */
export function parseReceiverKey(receiver: string): { workspaceKey: string | null; origin: string } {
  const at = receiver.indexOf(" ");
  const workspace = receiver.slice(0, at);
  return { workspaceKey: workspace === "platform" ? null : workspace, origin: receiver.slice(at + 1) };
}

/**
 * Lets a POST to a receiver through the receiver's circuit (deliveries and flows' http actions alike):
 * returns whether it is the half-open circuit's trial; an open circuit defers the job without spending an
 * attempt (the receiver is not tried).
 */
export async function admitThroughCircuit(breaker: CircuitBreaker, receiver: string): Promise<boolean> {
  const admission = await breaker.admit(receiver);
  if (!admission.allowed) {
    throw new DeferJobError(`circuit open for ${receiver}`, admission.retryInMs, circuitWait(receiver));
  }
  return admission.trial;
}

/**
 * Records a POST's outcome on the receiver's circuit; a success that closed an opened circuit makes the
 * jobs that waited for it due now.
 */
export async function recordOnCircuit(
  deps: Pick<OutboundDeps, "wakeWaiting"> & { readonly breaker: CircuitBreaker },
  receiver: string,
  succeeded: boolean,
  trial: boolean,
): Promise<void> {
  if (!succeeded) return deps.breaker.recordFailure(receiver);
  // The jobs that waited for the circuit (deliveries and flow runs) are due now.
  if (await deps.breaker.recordSuccess(receiver, trial)) await deps.wakeWaiting(circuitWait(receiver));
}

/** What a job deferred by a receiver's open circuit waits on. */
const circuitWait = (receiver: string) => `circuit:${receiver}`;

/**
 * One delivery attempt, counted once in `svc_webhook_deliveries_total`: by its outcome, or as `error` when
 * it failed before reaching the receiver for a reason of the platform's (the database, a secret that no
 * longer decrypts, a stored address that no longer parses).
 */
export async function deliver(deps: DeliverDeps, job: ClaimedJob<DeliverPayload>): Promise<void> {
  let counted = false;
  const count = (outcome: DeliveryOutcome) => {
    counted = true;
    deps.metrics.deliveries.labels(outcome).inc();
  };
  try {
    await attempt(deps, job, count);
  } catch (error) {
    if (!counted) count("error");
    throw error;
  }
}

async function attempt(
  deps: DeliverDeps,
  job: ClaimedJob<DeliverPayload>,
  count: (outcome: DeliveryOutcome) => void,
): Promise<void> {
  const p = job.payload;
  const sub = await deps.subscriptions.load(p.subscriptionId);
  // A disabled or deleted subscription's queued delivery does nothing, but tell what a crash left untold.
  if (sub === null || !sub.is_active) {
    if (sub !== null && sub.disabled_at !== null && !sub.disabled_announced)
      await announceDisabled(deps, p.subscriptionId, { ...sub, disabled_at: sub.disabled_at });
    // A delivery the log shows waiting (retrying, or resent) ends there: it is not sent.
    if (typeof p.deliveryId === "string") await deps.tables.endWaiting(p.deliveryId);
    return count("skipped");
  }
  // Turned on again after being off, a subscription starts from the events it takes from then on: a
  // delivery queued before (a retry that came due) is not sent. A resend or a recovery queues a new job,
  // and is sent. Both times are the database's, so no publisher's clock decides.
  if (sub.resumed_at !== null && job.createdAt.getTime() < sub.resumed_at.getTime()) {
    if (typeof p.deliveryId === "string") await deps.tables.endWaiting(p.deliveryId);
    return count("skipped");
  }
  // A paused workspace or an open circuit defers the delivery without spending one of its attempts.
  const deferring = async <T>(check: () => Promise<T>): Promise<T> => {
    try {
      return await check();
    } catch (error) {
      count("deferred");
      throw error;
    }
  };
  await deferring(() => deferWhilePaused(deps, sub.workspace_key));

  const url = new URL(sub.target_url);
  // One circuit per workspace and receiver origin: one tenant's failing endpoint never pauses another
  // tenant's deliveries to the same origin.
  const receiver = receiverKey(sub.workspace_key, url.origin);
  // The subscription's throttle, across every replica: over it, the attempt waits for the next second.
  // Before the circuit, so that a half-open circuit's one trial is never spent on a throttled attempt.
  const limit = sub.throttle_per_second;
  if (limit !== null) {
    await deferring(async () => {
      const decision = await deps.throttle.admit(p.subscriptionId, limit);
      if (!decision.allowed)
        throw new DeferJobError(`throttled to ${limit} attempts per second`, decision.retryInMs);
    });
  }
  const trial = await deferring(() => admitThroughCircuit(deps.breaker, receiver));

  const data = await shownData(deps, p.data, sub.include_sensitive_data);
  const delivery: WebhookDelivery = {
    event: p.event,
    workspaceKey: p.workspaceKey,
    occurredAtUtc: p.occurredAtUtc,
    data,
  };
  const body = Buffer.from(JSON.stringify(delivery));
  const secret = deps.secrets.open(sub.secret_encrypted);
  // During a rotation's overlap both secrets sign (the new one first); X-Svc-Signature uses the new one.
  const signing =
    sub.previous_secret_encrypted !== null &&
    sub.previous_secret_expires_at !== null &&
    sub.previous_secret_expires_at.getTime() > Date.now()
      ? [secret, deps.secrets.open(sub.previous_secret_encrypted)]
      : [secret];
  const attemptAt = Math.floor(Date.now() / 1000);
  // The subscription's own headers first: none of them can be one of the platform's (checked when set).
  const custom =
    sub.headers_sealed === null
      ? {}
      : (JSON.parse(deps.secrets.open(sub.headers_sealed)) as Record<string, string>);
  const headers = {
    ...custom,
    "content-type": "application/json",
    "user-agent": "svc-webhooks/1",
    [WebhookHeader.Event]: p.event,
    // A job without a delivery id (written by hand or by an older version) is sent without the id
    // headers, and so without the Standard Webhooks ones, rather than failing against a receiver it never
    // called.
    ...(typeof p.deliveryId === "string" && p.deliveryId !== ""
      ? {
          [WebhookHeader.Delivery]: p.deliveryId,
          [StandardWebhookHeader.Id]: p.deliveryId,
          [StandardWebhookHeader.Timestamp]: String(attemptAt),
          [StandardWebhookHeader.Signature]: [
            standardSignature(signing, p.deliveryId, attemptAt, body),
            ...(sub.ed25519_private_sealed === null
              ? []
              : [
                  asymmetricSignature(
                    deps.secrets.open(sub.ed25519_private_sealed),
                    p.deliveryId,
                    attemptAt,
                    body,
                  ),
                ]),
          ].join(" "),
        }
      : {}),
    [WebhookHeader.Signature]: signature(secret, body),
  };
  let status: number;
  let retryAfter: number | undefined;
  let excerpt: string;
  const timer = deps.metrics.duration.startTimer();
  const attemptedAt = new Date();
  const started = performance.now();
  // The delivery log's entry of this attempt: `final` when no attempt follows.
  const logged = (
    outcome: AttemptOutcome,
    final: boolean,
    answer: { statusCode?: number; excerpt?: string; error?: string },
  ) => {
    if (typeof p.deliveryId !== "string" || p.deliveryId === "") return;
    deps.deliveryLog.record({
      deliveryId: p.deliveryId,
      subscriptionId: p.subscriptionId,
      reachKey: sub.workspace_key,
      workspaceKey: p.workspaceKey,
      eventName: p.event,
      eventId: p.eventId,
      attempt: job.attempt,
      attemptedAt,
      durationMs: performance.now() - started,
      outcome,
      status: outcome === "delivered" ? "delivered" : final ? "failed" : "retrying",
      statusCode: answer.statusCode ?? null,
      responseExcerpt: answer.excerpt ?? null,
      error: answer.error ?? null,
      body,
    });
  };
  const lastAttempt = job.attempt >= job.maxAttempts;
  let abort = false;
  try {
    // A receiver that asks to stop gets no retry inside the attempt either.
    const response = await postJson(deps, url, body, headers, (r) =>
      abortsMessage(r) ? Number.POSITIVE_INFINITY : retryAfterMs(r.headers["retry-after"]),
    );
    status = response.status;
    retryAfter = retryAfterMs(response.headers["retry-after"]);
    abort = abortsMessage(response);
    excerpt = response.excerpt;
  } catch (error) {
    const refused = error instanceof PermanentJobError;
    logged("failed", refused || lastAttempt, { error: (error as Error).message });
    // A refused target is not the receiver's failure.
    if (refused) {
      count("refused");
      throw error;
    }
    timer({ outcome: "failed" });
    count("failed");
    await recordOnCircuit(deps, receiver, false, trial);
    await noteFailure(deps, p.subscriptionId, sub.failing_since);
    throw error;
  }
  const delivered = status >= 200 && status < 300;
  timer({ outcome: delivered ? "delivered" : "failed" });
  count(delivered ? "delivered" : "failed");
  await recordOnCircuit(deps, receiver, delivered, trial);
  const answer = { statusCode: status, excerpt };
  if (delivered) {
    logged("delivered", true, answer);
    // The subscription is healthy again (a write only when it was failing).
    if (sub.failing_since !== null) await deps.tables.markHealthy(p.subscriptionId);
    return;
  }
  const message = `receiver answered ${status}`;
  if (status === 410) {
    logged("failed", true, { ...answer, error: `${message} (Gone): the subscription is turned off` });
    await turnOff(deps, p.subscriptionId, GONE);
    throw new PermanentJobError(`${message} (Gone): the subscription is turned off`);
  }
  if (abort) {
    const reason = `${message} with ${ABORT_HEADER}: ${ABORT_VALUE}: no more attempts`;
    logged("failed", true, { ...answer, error: reason });
    await noteFailure(deps, p.subscriptionId, sub.failing_since);
    throw new PermanentJobError(reason);
  }
  // A receiver that says when to come back (429 or 503 with Retry-After) is throttling, not failing: the
  // next attempt waits at least that long and this one is not spent, for a day after the event at most
  // (then such an answer spends an attempt as any failure does, so the delivery still ends).
  if (
    (status === 429 || status === 503) &&
    retryAfter !== undefined &&
    Date.now() - Date.parse(p.occurredAtUtc) < THROTTLED_DEFERRAL_MS
  ) {
    const reason = `${message} with Retry-After ${Math.ceil(retryAfter / 1000)} s: attempt not spent`;
    logged("deferred", false, { ...answer, error: reason });
    throw new DeferJobError(reason, retryAfter);
  }
  logged("failed", lastAttempt, { ...answer, error: message });
  await noteFailure(deps, p.subscriptionId, sub.failing_since);
  throw retryAfter === undefined ? new Error(message) : new RetryLaterError(message, retryAfter);
}

/** How long after its event a delivery's 429 and 503 answers with Retry-After spend no attempt. */
export const THROTTLED_DEFERRAL_MS = 24 * 3_600_000;

/** Svix's convention, which Standard Webhooks receivers use: an answer that stops the message's retries. */
const ABORT_HEADER = "webhook-delivery";
const ABORT_VALUE = "abort-message";

/** A failed answer whose receiver asks that this message be tried no more. */
function abortsMessage(r: DeliveryResponse): boolean {
  const value = r.headers[ABORT_HEADER];
  return (
    (r.status < 200 || r.status >= 300) &&
    (Array.isArray(value) ? value : [value]).some((v) => v?.trim().toLowerCase() === ABORT_VALUE)
  );
}
