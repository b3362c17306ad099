/**
 * The delivery log: after each attempt that reached a receiver's address, what was sent and what came
 * back. Entries are written in batches (everything recorded during one write goes in the next), one
 * statement per batch, so the log costs a delivery no round trip of its own. A process killed between an
 * attempt and the next write loses that attempt's entry (at most one batch, written every 50 ms): the
 * delivery itself is the job's, and the log is what operators read, not what the platform relies on.
 */
import type { Db, Queries, SweepOptions } from "@svc/db";
import { isUuid, sql } from "@svc/db";
import type { Logger } from "@svc/observability";

/** Bodies larger than this are not kept (the entry says the body is too large to show). */
export const MAX_LOGGED_BODY_BYTES = 65_536;
const FLUSH_AFTER_MS = 50;
const MAX_BATCH = 500;

export type AttemptOutcome = "delivered" | "failed" | "deferred";
export type DeliveryStatus = "delivered" | "retrying" | "failed";

export interface AttemptEntry {
  readonly deliveryId: string;
  readonly subscriptionId: string;
  /** The subscription's workspace: who may read the entry. */
  readonly reachKey: string | null;
  readonly workspaceKey: string | null;
  readonly eventName: string;
  readonly eventId: string;
  readonly attempt: number;
  readonly attemptedAt: Date;
  readonly durationMs: number;
  readonly outcome: AttemptOutcome;
  /** The delivery's state after this attempt. */
  readonly status: DeliveryStatus;
  readonly statusCode: number | null;
  readonly responseExcerpt: string | null;
  readonly error: string | null;
  /** The body as sent. */
  readonly body: Buffer;
}

export class DeliveryLog {
  private pending: AttemptEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  record(entry: AttemptEntry): void {
    this.pending.push(entry);
    if (this.pending.length >= MAX_BATCH) this.flushSoon(0);
    else this.flushSoon(FLUSH_AFTER_MS);
  }

  /** Writes what is recorded (at stop, and for tests). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.writing = this.writing.then(() => this.writeBatch());
    await this.writing;
  }

  private flushSoon(ms: number): void {
    if (this.timer !== undefined && ms > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.flush(), ms);
    this.timer.unref();
  }

  private async writeBatch(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_BATCH);
      try {
        await writeAttempts(this.db, batch);
      } catch (err) {
        this.log.warn(
          { err, entries: batch.length },
          "could not write the delivery log; these entries are lost",
        );
      }
    }
  }
}

/** One statement: the attempts, and each delivery's row made or brought to its latest state. */
export async function writeAttempts(db: Queries, batch: readonly AttemptEntry[]): Promise<void> {
  // One row per delivery (a statement may not change a row twice): its first entry's creation and body,
  // its last entry's state.
  const byDelivery = new Map<string, { first: AttemptEntry; last: AttemptEntry; count: number }>();
  for (const e of batch) {
    const seen = byDelivery.get(e.deliveryId);
    if (seen === undefined) byDelivery.set(e.deliveryId, { first: e, last: e, count: 1 });
    else {
      seen.last = e;
      seen.count++;
    }
  }
  const deliveries = [...byDelivery.values()];
  const col = <T>(rows: readonly AttemptEntry[], f: (e: AttemptEntry) => T) => rows.map(f);
  const d = <T>(f: (x: (typeof deliveries)[number]) => T) => deliveries.map(f);
  await db.query(sql`
    WITH attempts AS (
      INSERT INTO webhook_dispatcher.delivery_attempts
        (delivery_id, attempt, attempted_at, duration_ms, outcome, status_code, response_excerpt, error)
      SELECT * FROM unnest(
        ${col(batch, (e) => e.deliveryId)}::uuid[], ${col(batch, (e) => e.attempt)}::int[],
        ${col(batch, (e) => e.attemptedAt)}::timestamptz[], ${col(batch, (e) => Math.round(e.durationMs))}::int[],
        ${col(batch, (e) => e.outcome)}::text[], ${col(batch, (e) => e.statusCode)}::int[],
        ${col(batch, (e) => e.responseExcerpt)}::text[], ${col(batch, (e) => e.error)}::text[])
    )
    INSERT INTO webhook_dispatcher.deliveries AS d
      (delivery_id, subscription_id, reach_key, workspace_key, event_name, event_id, status, attempts,
       last_status_code, body, created_at, updated_at)
    SELECT * FROM unnest(
      ${d((x) => x.first.deliveryId)}::uuid[], ${d((x) => x.first.subscriptionId)}::uuid[],
      ${d((x) => x.first.reachKey)}::text[], ${d((x) => x.first.workspaceKey)}::text[],
      ${d((x) => x.first.eventName)}::text[], ${d((x) => x.first.eventId)}::text[],
      ${d((x) => x.last.status)}::text[], ${d((x) => x.count)}::int[],
      ${d((x) => x.last.statusCode)}::int[],
      ${d((x) => (x.first.body.length > MAX_LOGGED_BODY_BYTES ? null : x.first.body.toString("utf8")))}::text[],
      ${d((x) => x.first.attemptedAt)}::timestamptz[], ${d((x) => x.last.attemptedAt)}::timestamptz[])
    ON CONFLICT (delivery_id) DO UPDATE SET
      status = EXCLUDED.status, attempts = d.attempts + EXCLUDED.attempts,
      last_status_code = EXCLUDED.last_status_code, updated_at = EXCLUDED.updated_at`);
}

/**
 * A delivery the log shows waiting for an attempt (retrying, or resent) that will not be sent (its
 * subscription is off or gone): failed. A job's delivery id that is no UUID (written by hand) has no entry.
 */
export async function endWaitingDelivery(db: Queries, deliveryId: string): Promise<void> {
  if (!isUuid(deliveryId)) return;
  await db.query(sql`
    UPDATE webhook_dispatcher.deliveries SET status = 'failed', updated_at = now()
    WHERE delivery_id = ${deliveryId}::uuid AND status = 'retrying'`);
}

/**
 * Forgets deliveries, and attempts, older than `days`, a batch at a time (the hourly housekeeping), so a
 * large backlog never holds a long transaction; stops after the batch in hand when `signal` is aborted.
 */
export async function sweepDeliveryLog(
  db: Queries,
  days: number,
  { signal, batch = 10_000 }: SweepOptions = {},
): Promise<number> {
  let removed = 0;
  for (;;) {
    const attempts = await db.query(sql`
      DELETE FROM webhook_dispatcher.delivery_attempts WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM webhook_dispatcher.delivery_attempts
        WHERE attempted_at < now() - make_interval(days => ${days}) LIMIT ${batch}))`);
    const deliveries = await db.query(sql`
      DELETE FROM webhook_dispatcher.deliveries WHERE delivery_id = ANY(ARRAY(
        SELECT delivery_id FROM webhook_dispatcher.deliveries
        WHERE updated_at < now() - make_interval(days => ${days}) LIMIT ${batch}))`);
    const n = (attempts.rowCount ?? 0) + (deliveries.rowCount ?? 0);
    removed += n;
    if (n === 0 || signal?.aborted) return removed;
  }
}
