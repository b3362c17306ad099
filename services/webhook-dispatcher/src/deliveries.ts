/**
 * Reading the delivery log (a subscription's deliveries, newest first, and one delivery's attempts), and
 * sending a delivery again.
 */
import { randomUUID } from "node:crypto";

import { reachCondition } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { ReplyOfRoute, RequestOfRoute, webhookRoutes } from "@svc/contracts";
import { type Db, join, type Listing, readPage, sql, toPage } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import { enqueue, keyedJob, nextRunOfKeyedJob } from "@svc/jobs";

import type { DeliveryStatus } from "./delivery-log.js";
import { deliverJob, type DeliverPayload, deliveryJobKey } from "./jobs.js";

type Routes = typeof webhookRoutes;
/** Newest first by (first attempt, delivery id). */
const DELIVERIES: Listing = { tag: "deliveries", kinds: ["timestamp", "uuid"] };

interface DeliveryRow {
  delivery_id: string;
  subscription_id: string;
  workspace_key: string | null;
  event_name: string;
  event_id: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  created_at: Date;
  updated_at: Date;
  created_at_us: string;
}

const summary = (r: DeliveryRow) => ({
  deliveryId: r.delivery_id,
  subscriptionId: r.subscription_id,
  eventName: r.event_name,
  eventId: r.event_id,
  workspaceKey: r.workspace_key,
  status: r.status,
  attempts: r.attempts,
  lastStatusCode: r.last_status_code,
  createdAtUtc: r.created_at.toISOString(),
  updatedAtUtc: r.updated_at.toISOString(),
});

const COLUMNS = sql`delivery_id, subscription_id, workspace_key, event_name, event_id, status, attempts,
  last_status_code, created_at, updated_at,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at_us`;

/** Who may read a delivery: the holders of its subscription's workspace, or a platform session. */
const reaches = (principal: Principal) => reachCondition(principal, (key) => sql`reach_key = ${key}`);

export async function listDeliveries(
  db: Db,
  req: RequestOfRoute<Routes["webhooks.deliveries"]>,
): Promise<ReplyOfRoute<Routes["webhooks.deliveries"]>> {
  const q = req.query;
  const page = readPage(q, DELIVERIES);
  // Another workspace's subscription is as if it did not exist; so is a deleted one.
  const subscription = await db.maybeOne(sql`
    SELECT 1 FROM webhook_dispatcher.subscriptions
    WHERE id = ${req.params.id}
      AND ${reachCondition(req.principal, (key) => sql`workspace_key = ${key}`)}`);
  if (subscription === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  // Only the filters given: each combination is a statement of its own, read through the index on
  // (subscription, first attempt).
  const conditions = [
    sql`subscription_id = ${req.params.id}`,
    ...(q.status === undefined ? [] : [sql`status = ${q.status}`]),
    ...(q.eventName === undefined ? [] : [sql`event_name = ${q.eventName}`]),
    ...(q.since === undefined ? [] : [sql`created_at >= ${q.since}::timestamptz`]),
    ...(q.until === undefined ? [] : [sql`created_at < ${q.until}::timestamptz`]),
    ...(page.after === null
      ? []
      : [sql`(created_at, delivery_id) < (${page.after[0]}::timestamptz, ${page.after[1]}::uuid)`]),
  ];
  const rows = await db.any<DeliveryRow>(sql`
    SELECT ${COLUMNS} FROM webhook_dispatcher.deliveries
    WHERE ${join(conditions, " AND ")}
    ORDER BY created_at DESC, delivery_id DESC
    LIMIT ${page.limit + 1}`);
  const body = toPage(rows, page.limit, DELIVERIES, (r) => [r.created_at_us, r.delivery_id], summary);
  return { status: 200, body };
}

export async function getDelivery(
  db: Db,
  req: RequestOfRoute<Routes["webhooks.delivery"]>,
): Promise<ReplyOfRoute<Routes["webhooks.delivery"]>> {
  const row = await db.maybeOne<DeliveryRow & { body: string | null; resend_job_key: string | null }>(sql`
    SELECT ${COLUMNS}, body, resend_job_key FROM webhook_dispatcher.deliveries
    WHERE delivery_id = ${req.params.deliveryId} AND ${reaches(req.principal)}`);
  if (row === null) throw new NotFoundError(`Delivery '${req.params.deliveryId}' was not found.`);
  const attempts = await db.any<{
    attempt: number;
    attempted_at: Date;
    duration_ms: number;
    outcome: "delivered" | "failed" | "deferred";
    status_code: number | null;
    response_excerpt: string | null;
    error: string | null;
  }>(sql`
    SELECT attempt, attempted_at, duration_ms, outcome, status_code, response_excerpt, error
    FROM webhook_dispatcher.delivery_attempts
    WHERE delivery_id = ${req.params.deliveryId}
    ORDER BY attempted_at, attempt`);
  const nextAttemptAt =
    row.status === "retrying"
      ? await nextRunOfKeyedJob(
          db,
          deliverJob.type,
          row.resend_job_key ?? deliveryJobKey(row.event_id, row.subscription_id),
        )
      : null;
  return {
    status: 200,
    body: {
      ...summary(row),
      payload: row.body === null ? null : (JSON.parse(row.body) as unknown),
      nextAttemptAtUtc: nextAttemptAt?.toISOString() ?? null,
      history: attempts.map((a) => ({
        attempt: a.attempt,
        attemptedAtUtc: a.attempted_at.toISOString(),
        durationMs: a.duration_ms,
        outcome: a.outcome,
        statusCode: a.status_code,
        responseExcerpt: a.response_excerpt,
        error: a.error,
      })),
    },
  };
}

/**
 * Sends a delivered or failed delivery again: one more `webhook.deliver` job with the first one's payload
 * (the event, its data unmasked as the job keeps it, the same delivery id), to the subscription as it is
 * now (its target, its secrets, its masking choice). The delivery is `retrying` from this moment, in the
 * same transaction as the job: a second resend meanwhile is a 409, as is a resend while it retries on its
 * own, or to a subscription that is turned off.
 */
export async function resendDelivery(
  db: Db,
  req: RequestOfRoute<Routes["webhooks.resend"]>,
): Promise<ReplyOfRoute<Routes["webhooks.resend"]>> {
  const id = req.params.deliveryId;
  return db.unitOfWork(async (tx) => {
    const row = await tx.maybeOne<{
      subscription_id: string;
      event_id: string;
      status: DeliveryStatus;
      is_active: boolean | null;
    }>(sql`
      SELECT d.subscription_id, d.event_id, d.status, s.is_active
      FROM webhook_dispatcher.deliveries d
      LEFT JOIN webhook_dispatcher.subscriptions s ON s.id = d.subscription_id
      WHERE d.delivery_id = ${id} AND ${reaches(req.principal)}
      FOR UPDATE OF d`);
    if (row === null) throw new NotFoundError(`Delivery '${id}' was not found.`);
    if (row.is_active === null)
      throw new NotFoundError(`The subscription of delivery '${id}' was deleted; it cannot be sent again.`);
    if (!row.is_active)
      throw new ConflictError(
        `The subscription of delivery '${id}' is turned off; turn it on to send again.`,
      );
    if (row.status === "retrying")
      throw new ConflictError(`Delivery '${id}' is waiting for its next attempt already.`);
    const job = await keyedJob(tx, deliverJob.type, deliveryJobKey(row.event_id, row.subscription_id));
    if (job === null) throw new NotFoundError(`Delivery '${id}' has no job left to send again.`);
    // Keyed, so that its next attempt's time can be found.
    const resendKey = `resend:${id}:${randomUUID()}`;
    await enqueue(tx, deliverJob, job.payload as DeliverPayload, {
      workspaceKey: job.workspaceKey,
      idempotencyKey: resendKey,
    });
    await tx.query(sql`
      UPDATE webhook_dispatcher.deliveries
      SET status = 'retrying', resend_job_key = ${resendKey}, updated_at = now()
      WHERE delivery_id = ${id}`);
    return {
      status: 202 as const,
      body: { deliveryId: id, status: "retrying" as const },
      headers: { location: `/api/webhooks/deliveries/${id}` },
    };
  });
}
