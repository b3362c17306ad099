/** Reading the delivery log: a subscription's deliveries, newest first, and one delivery's attempts. */
import { reachCondition } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { ReplyOfRoute, RequestOfRoute, webhookRoutes } from "@svc/contracts";
import { type Db, join, type Listing, readPage, sql, toPage } from "@svc/db";
import { NotFoundError } from "@svc/errors";
import { nextRunOfKeyedJob } from "@svc/jobs";

import type { DeliveryStatus } from "./delivery-log.js";
import { deliverJob, deliveryJobKey } from "./jobs.js";

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
  const row = await db.maybeOne<DeliveryRow & { body: string | null }>(sql`
    SELECT ${COLUMNS}, body FROM webhook_dispatcher.deliveries
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
      ? await nextRunOfKeyedJob(db, deliverJob.type, deliveryJobKey(row.event_id, row.subscription_id))
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
