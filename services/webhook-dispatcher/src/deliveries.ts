/**
 * Reading the delivery log (a subscription's deliveries, newest first, and one delivery's attempts), and
 * sending a delivery again.
 */
import { randomUUID } from "node:crypto";

import { reachWorkspace } from "@svc/access";
import type { ReplyOfRoute, RequestOfRoute, webhookRoutes } from "@svc/contracts";
import { type Db, isUuid, join, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ConflictError, NotFoundError, ValidationError } from "@svc/errors";
import {
  type ClaimedJob,
  DeferJobError,
  enqueue,
  failedJobsOfType,
  failedKeyedJobs,
  keyedJob,
  nextRunOfKeyedJob,
} from "@svc/jobs";

import type { DeliveryStatus } from "./delivery-log.js";
import { deliverJob, type DeliverPayload, deliveryJobKey, recoverJob, type RecoverPayload } from "./jobs.js";
import { reachableSubscription, type SubscriptionRepository } from "./subscriptions.js";

type Routes = typeof webhookRoutes;
/** Newest first by (first attempt, delivery id). */
const DELIVERIES: Listing = { tag: "deliveries", kinds: ["timestamp", "uuid"] };

export interface DeliveryRow {
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

export interface RecoveryRow {
  id: string;
  subscription_id: string;
  since: Date;
  until: Date;
  status: "running" | "done";
  queued: number;
  created_at: Date;
  finished_at: Date | null;
}

const recoveryView = (r: RecoveryRow) => ({
  recoveryId: r.id,
  subscriptionId: r.subscription_id,
  sinceUtc: r.since.toISOString(),
  untilUtc: r.until.toISOString(),
  status: r.status,
  queued: r.queued,
  createdAtUtc: r.created_at.toISOString(),
  finishedAtUtc: r.finished_at?.toISOString() ?? null,
});

const RECOVERY_COLUMNS = sql`id, subscription_id, since, until, status, queued, created_at, finished_at`;

/** Which of a subscription's deliveries a page holds (the filters given), after its cursor. */
export interface DeliveryFilter {
  readonly subscriptionId: string;
  readonly status?: DeliveryStatus;
  readonly eventName?: string;
  readonly since?: string;
  readonly until?: string;
  readonly page: ReturnType<typeof readPage>;
}

export interface AttemptRow {
  attempt: number;
  attempted_at: Date;
  duration_ms: number;
  outcome: "delivered" | "failed" | "deferred";
  status_code: number | null;
  response_excerpt: string | null;
  error: string | null;
}

/** A delivery with what `GET /api/webhooks/{id}/deliveries/{deliveryId}` shows beside its summary. */
export interface DeliveryDetail {
  readonly delivery: DeliveryRow & { body: string | null };
  /** In the order they were made. */
  readonly attempts: readonly AttemptRow[];
  /** When the queued attempt runs; null when none is queued. */
  readonly nextAttemptAt: Date | null;
}

/** A delivery as a resend finds it (locked until the resend is decided): its subscription's state too. */
export interface ResendCandidate {
  readonly status: DeliveryStatus;
  /** Null when the subscription was deleted. */
  readonly subscriptionActive: boolean | null;
}

/**
 * What the delivery-log routes ask of their tables (the rules stay in the handlers): `within` is the one
 * workspace whose subscriptions' deliveries a session reaches, null for any.
 */
export interface DeliveryRepository {
  /** Newest first by (first attempt, delivery id), one more than the page's limit. */
  page(filter: DeliveryFilter): Promise<DeliveryRow[]>;
  find(deliveryId: string, subscriptionId: string, within: string | null): Promise<DeliveryDetail | null>;
  /**
   * Queues the delivery again (one more `webhook.deliver` job with the first one's payload, the same
   * delivery id) and shows it `retrying`, unless `check` throws on it as it is: both in one step, so a
   * second resend meanwhile sees `retrying`. `no-job` when the first job is gone (nothing is changed).
   */
  resend(
    deliveryId: string,
    subscriptionId: string,
    within: string | null,
    check: (candidate: ResendCandidate) => void,
  ): Promise<"queued" | "no-job" | "not-found">;
  /** Records a recovery of [since, until) for the subscription, with the job that pages through it. */
  startRecovery(
    subscription: { readonly id: string; readonly workspaceKey: string | null },
    since: Date,
    until: Date,
  ): Promise<RecoveryRow>;
  findRecovery(
    recoveryId: string,
    subscriptionId: string,
    within: string | null,
  ): Promise<RecoveryRow | null>;
}

/** How many dead letters the housekeeping's settling pass reads at a time. */
const SETTLE_BATCH = 500;

/**
 * These deliveries, where the log shows them `retrying` while their queued job has ended Failed with no
 * attempt recording the end (an operator cancelled the job, or its lease expired on its last attempt):
 * `failed` now, so they read as what they are and may be resent. Returns the ids it settled.
 */
export async function settleStrandedDeliveries(
  db: Queries,
  deliveryIds: readonly string[],
): Promise<string[]> {
  if (deliveryIds.length === 0) return [];
  const rows = await db.any<{
    delivery_id: string;
    event_id: string;
    subscription_id: string;
    resend_job_key: string | null;
  }>(sql`
    SELECT delivery_id::text, event_id, subscription_id::text, resend_job_key
    FROM webhook_dispatcher.deliveries
    WHERE delivery_id = ANY(${deliveryIds}::uuid[]) AND status = 'retrying'`);
  const keyOf = (r: (typeof rows)[number]) =>
    r.resend_job_key ?? deliveryJobKey(r.event_id, r.subscription_id);
  const failed = await failedKeyedJobs(db, deliverJob.type, rows.map(keyOf));
  const stranded = rows.filter((r) => failed.has(keyOf(r)));
  if (stranded.length === 0) return [];
  // Unless a resend queued it again meanwhile (another job key): that one is waiting for real.
  const changed = await db.any<{ delivery_id: string }>(sql`
    UPDATE webhook_dispatcher.deliveries d SET status = 'failed', updated_at = now()
    FROM unnest(${stranded.map((r) => r.delivery_id)}::uuid[], ${stranded.map((r) => r.resend_job_key)}::text[])
      AS s(delivery_id, resend_job_key)
    WHERE d.delivery_id = s.delivery_id AND d.status = 'retrying'
      AND d.resend_job_key IS NOT DISTINCT FROM s.resend_job_key
    RETURNING d.delivery_id::text`);
  return changed.map((r) => r.delivery_id);
}

/**
 * The housekeeping's pass of `settleStrandedDeliveries` (at start, then hourly): every delivery of a
 * `webhook.deliver` job dead-lettered at `since` or later, read from the dead letters a batch at a time
 * (a few, where the log may hold millions); stops after the batch in hand when `signal` is aborted.
 * Returns the ids it settled.
 */
export async function settleAllStrandedDeliveries(
  db: Queries,
  since: Date,
  signal?: AbortSignal,
): Promise<string[]> {
  const settled: string[] = [];
  for (let after = "0"; ;) {
    const dead = await failedJobsOfType(db, deliverJob.type, since, after, SETTLE_BATCH);
    const ids = dead
      .map((j) => (j.payload as Partial<DeliverPayload> | null)?.deliveryId)
      .filter((id): id is string => typeof id === "string" && isUuid(id));
    settled.push(...(await settleStrandedDeliveries(db, ids)));
    const last = dead.at(-1);
    if (last === undefined || dead.length < SETTLE_BATCH || signal?.aborted) return settled;
    after = last.id;
  }
}

/** Who may read a delivery: the holders of its subscription's workspace (`within`), or anyone (null). */
const reaches = (within: string | null) => sql`(${within}::text IS NULL OR reach_key = ${within}::text)`;

/** The delivery log in PostgreSQL. */
export function deliveryTables(db: Db): DeliveryRepository {
  return {
    page: async ({ subscriptionId, status, eventName, since, until, page }) => {
      // Only the filters given: each combination is a statement of its own, read through the index on
      // (subscription, first attempt).
      const conditions = [
        sql`subscription_id = ${subscriptionId}`,
        ...(status === undefined ? [] : [sql`status = ${status}`]),
        ...(eventName === undefined ? [] : [sql`event_name = ${eventName}`]),
        ...(since === undefined ? [] : [sql`created_at >= ${since}::timestamptz`]),
        ...(until === undefined ? [] : [sql`created_at < ${until}::timestamptz`]),
        ...(page.after === null
          ? []
          : [sql`(created_at, delivery_id) < (${page.after[0]}::timestamptz, ${page.after[1]}::uuid)`]),
      ];
      const read = () =>
        db.any<DeliveryRow>(sql`
          SELECT ${COLUMNS} FROM webhook_dispatcher.deliveries
          WHERE ${join(conditions, " AND ")}
          ORDER BY created_at DESC, delivery_id DESC
          LIMIT ${page.limit + 1}`);
      const rows = await read();
      const waiting = rows.filter((r) => r.status === "retrying").map((r) => r.delivery_id);
      // A delivery whose job ended unseen is settled before it is shown; the page is read again (a status
      // filter may no longer hold it).
      if (waiting.length === 0 || (await settleStrandedDeliveries(db, waiting)).length === 0) return rows;
      return read();
    },
    find: async (deliveryId, subscriptionId, within) => {
      const read = () =>
        db.maybeOne<DeliveryRow & { body: string | null; resend_job_key: string | null }>(sql`
          SELECT ${COLUMNS}, body, resend_job_key FROM webhook_dispatcher.deliveries
          WHERE delivery_id = ${deliveryId} AND subscription_id = ${subscriptionId} AND ${reaches(within)}`);
      let delivery = await read();
      if (delivery === null) return null;
      // Waiting on a job that ended unseen: settled (failed) before it is shown.
      if (delivery.status === "retrying" && (await settleStrandedDeliveries(db, [deliveryId])).length > 0)
        delivery = await read();
      if (delivery === null) return null;
      const attempts = await db.any<AttemptRow>(sql`
        SELECT attempt, attempted_at, duration_ms, outcome, status_code, response_excerpt, error
        FROM webhook_dispatcher.delivery_attempts
        WHERE delivery_id = ${deliveryId}
        ORDER BY attempted_at, attempt`);
      const nextAttemptAt =
        delivery.status === "retrying"
          ? await nextRunOfKeyedJob(
              db,
              deliverJob.type,
              delivery.resend_job_key ?? deliveryJobKey(delivery.event_id, delivery.subscription_id),
            )
          : null;
      return { delivery, attempts, nextAttemptAt };
    },
    resend: (deliveryId, subscriptionId, within, check) =>
      db.unitOfWork(async (tx) => {
        const row = await tx.maybeOne<{
          event_id: string;
          status: DeliveryStatus;
          is_active: boolean | null;
        }>(sql`
          SELECT d.event_id, d.status, s.is_active
          FROM webhook_dispatcher.deliveries d
          LEFT JOIN webhook_dispatcher.subscriptions s ON s.id = d.subscription_id
          WHERE d.delivery_id = ${deliveryId} AND d.subscription_id = ${subscriptionId} AND ${reaches(within)}
          FOR UPDATE OF d`);
        if (row === null) return "not-found";
        // Waiting on a job that ended unseen (cancelled, say): failed, so it may be sent again.
        const status =
          row.status === "retrying" && (await settleStrandedDeliveries(tx, [deliveryId])).length > 0
            ? "failed"
            : row.status;
        check({ status, subscriptionActive: row.is_active });
        const queued = await queueAgain(tx, {
          delivery_id: deliveryId,
          event_id: row.event_id,
          subscription_id: subscriptionId,
        });
        return queued ? "queued" : "no-job";
      }),
    startRecovery: (subscription, since, until) =>
      db.unitOfWork(async (tx) => {
        const row = await tx.one<RecoveryRow>(sql`
          INSERT INTO webhook_dispatcher.recoveries (id, subscription_id, reach_key, since, until)
          VALUES (${randomUUID()}, ${subscription.id}, ${subscription.workspaceKey}, ${since}, ${until})
          RETURNING ${RECOVERY_COLUMNS}`);
        await enqueue(tx, recoverJob, { recoveryId: row.id }, { workspaceKey: subscription.workspaceKey });
        return row;
      }),
    findRecovery: (recoveryId, subscriptionId, within) =>
      db.maybeOne<RecoveryRow>(sql`
        SELECT ${RECOVERY_COLUMNS} FROM webhook_dispatcher.recoveries
        WHERE id = ${recoveryId} AND subscription_id = ${subscriptionId} AND ${reaches(within)}`),
  };
}

export async function listDeliveries(
  tables: DeliveryRepository,
  subscriptions: SubscriptionRepository,
  req: RequestOfRoute<Routes["webhooks.deliveries"]>,
): Promise<ReplyOfRoute<Routes["webhooks.deliveries"]>> {
  const q = req.query;
  const page = readPage(q, DELIVERIES);
  // Another workspace's subscription is as if it did not exist; so is a deleted one.
  await reachableSubscription(subscriptions, req.params.id, req.principal);
  const rows = await tables.page({
    subscriptionId: req.params.id,
    ...(q.status === undefined ? {} : { status: q.status }),
    ...(q.eventName === undefined ? {} : { eventName: q.eventName }),
    ...(q.since === undefined ? {} : { since: q.since }),
    ...(q.until === undefined ? {} : { until: q.until }),
    page,
  });
  const body = toPage(rows, page.limit, DELIVERIES, (r) => [r.created_at_us, r.delivery_id], summary);
  return { status: 200, body };
}

export async function getDelivery(
  tables: DeliveryRepository,
  req: RequestOfRoute<Routes["webhooks.delivery"]>,
): Promise<ReplyOfRoute<Routes["webhooks.delivery"]>> {
  const found = await tables.find(req.params.deliveryId, req.params.id, reachWorkspace(req.principal));
  if (found === null) throw new NotFoundError(`Delivery '${req.params.deliveryId}' was not found.`);
  const row = found.delivery;
  return {
    status: 200,
    body: {
      ...summary(row),
      payload:
        row.body === null
          ? null
          : (JSON.parse(row.body) as {
              event: string;
              workspaceKey: string | null;
              occurredAtUtc: string;
              data: unknown;
            }),
      nextAttemptAtUtc: found.nextAttemptAt?.toISOString() ?? null,
      history: found.attempts.map((a) => ({
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
 * Queues a delivery again in `tx`: one more `webhook.deliver` job with the first job's payload (the same
 * delivery id), keyed so that its next attempt's time can be found; the delivery shows `retrying`. False
 * when the first job is gone.
 */
async function queueAgain(
  tx: Queries,
  d: { delivery_id: string; event_id: string; subscription_id: string },
): Promise<boolean> {
  const job = await keyedJob(tx, deliverJob.type, deliveryJobKey(d.event_id, d.subscription_id));
  if (job === null) return false;
  const resendKey = `resend:${d.delivery_id}:${randomUUID()}`;
  await enqueue(tx, deliverJob, job.payload as DeliverPayload, {
    workspaceKey: job.workspaceKey,
    idempotencyKey: resendKey,
  });
  await tx.query(sql`
    UPDATE webhook_dispatcher.deliveries
    SET status = 'retrying', resend_job_key = ${resendKey}, updated_at = now()
    WHERE delivery_id = ${d.delivery_id}`);
  return true;
}

/**
 * Sends a delivered or failed delivery again: one more `webhook.deliver` job with the first one's payload
 * (the event, its data unmasked as the job keeps it, the same delivery id), to the subscription as it is
 * now (its target, its secrets, its masking choice). The delivery is `retrying` from this moment, in the
 * same transaction as the job: a second resend meanwhile is a 409, as is a resend while it retries on its
 * own, or to a subscription that is turned off.
 */
export async function resendDelivery(
  tables: DeliveryRepository,
  req: RequestOfRoute<Routes["webhooks.resend"]>,
): Promise<ReplyOfRoute<Routes["webhooks.resend"]>> {
  const id = req.params.deliveryId;
  const outcome = await tables.resend(id, req.params.id, reachWorkspace(req.principal), (d) => {
    if (d.subscriptionActive === null)
      throw new NotFoundError(`The subscription of delivery '${id}' was deleted; it cannot be sent again.`);
    if (!d.subscriptionActive)
      throw new ConflictError(
        `The subscription of delivery '${id}' is turned off; turn it on to send again.`,
      );
    if (d.status === "retrying")
      throw new ConflictError(`Delivery '${id}' is waiting for its next attempt already.`);
  });
  if (outcome === "not-found") throw new NotFoundError(`Delivery '${id}' was not found.`);
  if (outcome === "no-job") throw new NotFoundError(`Delivery '${id}' has no job left to send again.`);
  return {
    status: 202 as const,
    body: { deliveryId: id, status: "retrying" as const },
    headers: { location: `/api/webhooks/${req.params.id}/deliveries/${id}` },
  };
}

/**
 * Starts sending again every failed delivery of a subscription whose first attempt falls in
 * [since, until) (until: now when left out): one `webhook.recover` job, made in the transaction of the
 * recovery's row, pages through them (`recoverPage`).
 */
export async function startRecovery(
  tables: DeliveryRepository,
  subscriptions: SubscriptionRepository,
  req: RequestOfRoute<Routes["webhooks.recover"]>,
): Promise<ReplyOfRoute<Routes["webhooks.recover"]>> {
  const since = new Date(req.query.since);
  const until = req.query.until === undefined ? new Date() : new Date(req.query.until);
  if (!(since < until))
    throw new ValidationError([
      { field: "/query/since", message: "must be before until (now when left out)" },
    ]);
  const sub = await reachableSubscription(subscriptions, req.params.id, req.principal);
  if (!sub.is_active)
    throw new ConflictError(
      `Subscription '${req.params.id}' is turned off; turn it on to recover its deliveries.`,
    );
  const row = await tables.startRecovery({ id: sub.id, workspaceKey: sub.workspace_key }, since, until);
  return {
    status: 202 as const,
    body: recoveryView(row),
    headers: { location: `/api/webhooks/${req.params.id}/recoveries/${row.id}` },
  };
}

export async function getRecovery(
  tables: DeliveryRepository,
  req: RequestOfRoute<Routes["webhooks.recovery"]>,
): Promise<ReplyOfRoute<Routes["webhooks.recovery"]>> {
  const row = await tables.findRecovery(req.params.recoveryId, req.params.id, reachWorkspace(req.principal));
  if (row === null) throw new NotFoundError(`Recovery '${req.params.recoveryId}' was not found.`);
  return { status: 200, body: recoveryView(row) };
}

/**
 * One page of a recovery (`pageSize`, BackendHost:WebhookRecoveryPageSize): the next failed deliveries after its cursor are queued again, and the cursor
 * and the count move, in one transaction; a full page defers the job a second (no attempt spent), the last
 * one ends the recovery.
 */
export async function recoverPage(db: Db, job: ClaimedJob<RecoverPayload>, pageSize: number): Promise<void> {
  const more = await db.unitOfWork(async (tx) => {
    const r = await tx.maybeOne<{
      subscription_id: string;
      since: Date;
      until: Date;
      status: string;
      after_delivery_id: string | null;
    }>(sql`
      SELECT subscription_id, since, until, status, after_delivery_id FROM webhook_dispatcher.recoveries
      WHERE id = ${job.payload.recoveryId} FOR UPDATE`);
    if (r === null || r.status === "done") return false;
    const page = await tx.any<{ delivery_id: string; event_id: string; subscription_id: string }>(sql`
      SELECT delivery_id, event_id, subscription_id FROM webhook_dispatcher.deliveries
      WHERE subscription_id = ${r.subscription_id} AND status = 'failed'
        AND created_at >= ${r.since} AND created_at < ${r.until}
        AND (${r.after_delivery_id}::uuid IS NULL OR (created_at, delivery_id) > (
          SELECT after_created_at, after_delivery_id FROM webhook_dispatcher.recoveries
          WHERE id = ${job.payload.recoveryId}))
      ORDER BY created_at, delivery_id
      LIMIT ${pageSize}`);
    let queued = 0;
    for (const d of page) if (await queueAgain(tx, d)) queued++;
    const last = page.at(-1)?.delivery_id ?? null;
    const done = page.length < pageSize;
    await tx.query(sql`
      UPDATE webhook_dispatcher.recoveries
      SET queued = queued + ${queued},
          after_created_at = coalesce(
            (SELECT created_at FROM webhook_dispatcher.deliveries WHERE delivery_id = ${last}::uuid),
            after_created_at),
          after_delivery_id = coalesce(${last}::uuid, after_delivery_id),
          status = CASE WHEN ${done} THEN 'done' ELSE status END,
          finished_at = CASE WHEN ${done} THEN now() END
      WHERE id = ${job.payload.recoveryId}`);
    return !done;
  });
  if (more) throw new DeferJobError("recovering: the next page in a second", 1_000);
}
