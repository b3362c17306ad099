/**
 * The engine's SQL, next to the functions that run it. Batches use `unnest` so that one statement claims,
 * completes or fails many jobs; every write-back names the fencing token it holds and only touches rows
 * whose token still matches.
 */
import {
  type Db,
  empty,
  join,
  outsideUnitOfWork,
  type Queries,
  raw,
  type Sql,
  sql,
  type SweepOptions,
} from "@svc/db";

import type { ClaimedJob, JobStatus, JobView } from "./types.js";

/** The PostgreSQL channel on which workers hear that jobs of a type (the payload) are due. */
export const NOTIFY_CHANNEL = "svc_jobs";

/** Tells the workers of each of these job types (once per type) that jobs of it are due now. */
async function notifyWorkers(db: Queries, types: readonly string[]): Promise<void> {
  const distinct = [...new Set(types)];
  if (distinct.length === 0) return;
  await db.query(sql`SELECT pg_notify(${NOTIFY_CHANNEL}, t) FROM unnest(${distinct}::text[]) AS t`);
}

/**
 * Job ids (or fencing tokens) as one `bigint[]`, sent as a single text parameter: node-postgres writes an
 * array parameter element by element, which was a tenth of a worker's time per job in the benchmark.
 */
function bigints(values: readonly string[]): Sql {
  for (const v of values) if (!/^\d{1,19}$/.test(v)) throw new TypeError(`not a job id or token: ${v}`);
  return sql`string_to_array(${values.join(",")}, ',')::bigint[]`;
}

export interface NewJob {
  readonly type: string;
  readonly payload: unknown;
  readonly workspaceKey: string | null;
  readonly maxAttempts: number;
  readonly runAt: Date | null;
  readonly idempotencyKey: string | null;
  readonly traceContext: string | null;
}

/** Inserts jobs; a job whose (type, idempotency key) exists already is not inserted again. */
export async function insertJobs(
  db: Queries,
  jobs: readonly NewJob[],
): Promise<Array<{ id: string; created: boolean }>> {
  if (jobs.length === 0) return [];
  const inserted = await db.any<{
    id: string;
    type: string;
    idempotency_key: string | null;
    ord: number;
  }>(sql`
    INSERT INTO job_reaper.jobs (type, payload, workspace_key, max_attempts, run_at, idempotency_key, trace_context)
    SELECT type, payload, workspace_key, max_attempts, coalesce(run_at, now()), idempotency_key, trace_context
    FROM unnest(
      ${jobs.map((j) => j.type)}::text[],
      ${jobs.map((j) => JSON.stringify(j.payload ?? {}))}::jsonb[],
      ${jobs.map((j) => j.workspaceKey)}::text[],
      ${jobs.map((j) => j.maxAttempts)}::int[],
      ${jobs.map((j) => j.runAt?.toISOString() ?? null)}::timestamptz[],
      ${jobs.map((j) => j.idempotencyKey)}::text[],
      ${jobs.map((j) => j.traceContext)}::text[]
    ) WITH ORDINALITY AS n(type, payload, workspace_key, max_attempts, run_at, idempotency_key, trace_context, ord)
    ORDER BY ord
    ON CONFLICT (type, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id::text, type, idempotency_key, 0 AS ord`);
  if (inserted.length === jobs.length) return inserted.map((r) => ({ id: r.id, created: true }));
  // Some were duplicates: find the existing ids, and answer in the caller's order.
  const createdByKey = new Map(inserted.map((r) => [`${r.type}\n${r.idempotency_key}`, r.id]));
  const createdWithoutKey = inserted.filter((r) => r.idempotency_key === null).map((r) => r.id);
  const missing = jobs.filter(
    (j) => j.idempotencyKey !== null && !createdByKey.has(`${j.type}\n${j.idempotencyKey}`),
  );
  const existing = await db.any<{ id: string; type: string; idempotency_key: string }>(sql`
    SELECT id::text, type, idempotency_key FROM job_reaper.jobs
    WHERE (type, idempotency_key) IN (
      SELECT * FROM unnest(${missing.map((j) => j.type)}::text[], ${missing.map((j) => j.idempotencyKey)}::text[]))`);
  const existingByKey = new Map(existing.map((r) => [`${r.type}\n${r.idempotency_key}`, r.id]));
  let withoutKey = 0;
  return jobs.map((j) => {
    if (j.idempotencyKey === null) return { id: createdWithoutKey[withoutKey++] as string, created: true };
    const key = `${j.type}\n${j.idempotencyKey}`;
    const created = createdByKey.get(key);
    return created !== undefined
      ? { id: created, created: true }
      : { id: existingByKey.get(key) as string, created: false };
  });
}

/**
 * A time as milliseconds since the epoch (float8): node-postgres parses a timestamptz with a regular
 * expression, three per claimed job, a tenth of a worker's time per job in the benchmark.
 */
const epochMs = (column: Sql) => sql`(extract(epoch FROM ${column}) * 1000)::float8`;

/** A claimed row as the claim answers it (times in epoch ms). */
interface ClaimRow {
  id: string;
  type: string;
  payload: unknown;
  workspace_key: string | null;
  attempts: number;
  max_attempts: number;
  token: string;
  run_at: number;
  lease_expires_at: number;
  trace_context: string | null;
  created_at: number;
}

/**
 * A claim's fencing token: the milliseconds since 2026 on PostgreSQL's clock, times 2^20, plus the next
 * value of a sequence (mod 2^20, so unique within a millisecond). A claim commits asynchronously (below),
 * and a crash can lose the last claims with the sequence's own advance: the sequence alone would hand a
 * lost claim's token out again, to the next claim of the same job, and let the first run's late
 * write-back through. The clock has moved on by then, so the token is new and still larger than any
 * before it. It fits a bigint until the year 2304.
 */
const NEXT_TOKEN = sql`(SELECT
  ((extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1767225600000) * 1048576
  + nextval('job_reaper.fencing_tokens') % 1048576)`;

/**
 * Leases the jobs `due` selects (locked, `id` column) to `workerId`, all under one new fencing token (it
 * rotates on every claim of a job: a job claimed again gets a later one). `summary` is a one-row query
 * over `due` whose columns each row answers too.
 *
 * The claim commits without waiting for its WAL to reach the disk (`synchronous_commit` off for its own
 * transaction only): that wait was about 0.6 of the 3.5 ms from a job's enqueue to its start here. A claim that a PostgreSQL
 * crash loses leaves its jobs as they were, Pending, so they run again, as when a worker's lease runs
 * out; the first run's write-back is then refused by the token. A completion still waits for the disk
 * (and flushes any claim before it). It runs on the pool even when called inside a caller's unit of
 * work (`outsideUnitOfWork`): joined to it, the claim would stand or fall with the caller's transaction,
 * and the caller's commit would be asynchronous too.
 *
 * The rows are looked up by `id = ANY(ARRAY(…))`, never joined to `due`: a join was planned as a hash
 * join over a scan of the whole table (10 ms of a 25 ms claim of 500 among 20,000 jobs) or a nested loop
 * probing the array once per row; a sequence value per row cost as much again.
 */
function leaseDue<X extends object = object>(
  db: Db,
  due: Sql,
  leaseMs: number,
  workerId: string,
  summary?: { readonly query: Sql; readonly columns: Sql },
) {
  return outsideUnitOfWork(() =>
    db.any<ClaimRow & X>(sql`
    WITH due AS (${due})
    UPDATE job_reaper.jobs AS j
    SET status = 'Running',
        attempts = j.attempts + 1,
        lease_token = ${NEXT_TOKEN},
        lease_expires_at = now() + make_interval(secs => ${leaseMs / 1000}),
        started_at = now(),
        locked_by = ${workerId}
    ${summary === undefined ? empty : sql`FROM (${summary.query}) AS s`}
    WHERE j.id = ANY(ARRAY(SELECT id FROM due))
      AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
    RETURNING j.id::text, j.type, j.payload, j.workspace_key, j.attempts, j.max_attempts,
              j.lease_token::text AS token, ${epochMs(sql`j.run_at`)} AS run_at,
              ${epochMs(sql`j.lease_expires_at`)} AS lease_expires_at, j.trace_context,
              ${epochMs(sql`j.created_at`)} AS created_at
              ${summary === undefined ? empty : summary.columns}`),
  );
}

/**
 * Claims up to `limit` due jobs of one type, oldest first: each gets a new fencing token and a lease. SKIP
 * LOCKED lets concurrent claimers take disjoint rows without waiting on each other.
 */
export async function claimJobs(
  db: Db,
  type: string,
  limit: number,
  leaseMs: number,
  workerId: string,
): Promise<ClaimedJob[]> {
  const rows = await leaseDue(
    db,
    sql`
      SELECT id FROM job_reaper.jobs
      WHERE status = 'Pending' AND type = ${type} AND run_at <= now()
      ORDER BY run_at, id
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`,
    leaseMs,
    workerId,
  );
  return rows.map(claimedJob);
}

/**
 * Claims up to `limit` due jobs of one type round the workspaces with jobs of that type waiting: up to
 * `visit` of them ('' for the workspace-less jobs), in key order after `after` (from the first when null),
 * found by a skip scan of `jobs_pending_workspace_idx` (one index probe each, due or not); each one's
 * oldest due first, one of each in turn, an equal share of `limit` at most; what is left of `limit` goes to
 * the oldest due jobs of any workspace. So a workspace with one job waiting gets it claimed now, however
 * many of another's are older. Within a turn the workspaces the claimer holds none of come first (a
 * claim of one job, with the queue nearly full, goes to a workspace with none queued rather than to the
 * oldest job). `skip`ped workspaces get none, and then nothing is taken beyond the turns. `next` is where
 * the following round starts (null: from the first again; undefined when nothing was claimed).
 */
export async function claimJobsRoundRobin(
  db: Db,
  type: string,
  after: string | null,
  visit: number,
  limit: number,
  leaseMs: number,
  workerId: string,
  /** Workspaces the claimer holds jobs of already: in each turn they come after the others. */
  holding: readonly string[] = [],
  /** Workspaces to leave out (at their limit of running jobs); then nothing beyond the turns is taken. */
  skip: readonly string[] = [],
): Promise<{ jobs: ClaimedJob[]; next: string | null | undefined }> {
  const from = after === null ? sql`>= ''` : sql`> ${after}`;
  const rows = await leaseDue<{ last_visited: string | null; visited: number }>(
    db,
    sql`
      WITH RECURSIVE ws(k, n) AS (
        SELECT (SELECT coalesce(workspace_key, '') FROM job_reaper.jobs
                WHERE status = 'Pending' AND type = ${type} AND coalesce(workspace_key, '') ${from}
                ORDER BY coalesce(workspace_key, '') LIMIT 1), 1
        UNION ALL
        SELECT (SELECT coalesce(j.workspace_key, '') FROM job_reaper.jobs j
                WHERE j.status = 'Pending' AND j.type = ${type} AND coalesce(j.workspace_key, '') > ws.k
                ORDER BY coalesce(j.workspace_key, '') LIMIT 1), ws.n + 1
        FROM ws WHERE ws.k IS NOT NULL AND ws.n < ${visit}
      ), visited AS (
        SELECT max(k) AS last, count(k)::int AS n FROM ws
      ), candidates AS (
        SELECT h.id, h.turn, h.run_at, ws.k
        FROM ws CROSS JOIN LATERAL (
          SELECT p.id, p.run_at, row_number() OVER (ORDER BY p.run_at, p.id) AS turn
          FROM job_reaper.jobs p
          WHERE p.status = 'Pending' AND p.type = ${type} AND coalesce(p.workspace_key, '') = ws.k
            AND p.run_at <= now()
          ORDER BY p.run_at, p.id
          LIMIT (SELECT greatest(1, ceil(${limit}::numeric / greatest(n, 1)))::int FROM visited)) h
        WHERE ws.k IS NOT NULL AND ws.k <> ALL(${skip}::text[])
        ${
          skip.length > 0
            ? empty
            : sql`UNION ALL
        (SELECT id, ${limit + 1}, run_at, coalesce(workspace_key, '') FROM job_reaper.jobs
         WHERE status = 'Pending' AND type = ${type} AND run_at <= now()
         ORDER BY run_at, id LIMIT ${limit})`
        }
      ), picked AS (
        SELECT id, min(turn) AS turn, bool_and(k = ANY(${holding}::text[])) AS held, min(run_at) AS run_at
        FROM candidates GROUP BY id
      )
      -- The limit counts locked rows: a row another claimer holds is passed over for the next candidate.
      SELECT j.id, v.last AS last_visited, v.n AS visited
      FROM job_reaper.jobs j JOIN picked p USING (id) CROSS JOIN visited v
      -- Checked again on the locked row: another claimer may have taken it since it was read.
      WHERE j.status = 'Pending' AND j.run_at <= now()
      ORDER BY p.turn, p.held, p.run_at
      LIMIT ${limit}
      FOR UPDATE OF j SKIP LOCKED`,
    leaseMs,
    workerId,
    { query: sql`SELECT last_visited, visited FROM due LIMIT 1`, columns: sql`, s.last_visited, s.visited` },
  );
  const first = rows[0];
  return {
    jobs: rows.map(claimedJob),
    next: first === undefined ? undefined : first.visited < visit ? null : first.last_visited,
  };
}

function claimedJob(r: ClaimRow): ClaimedJob {
  return {
    id: r.id,
    type: r.type,
    payload: r.payload,
    workspaceKey: r.workspace_key,
    attempt: r.attempts,
    maxAttempts: r.max_attempts,
    token: r.token,
    runAt: new Date(r.run_at),
    leaseExpiresAt: new Date(r.lease_expires_at),
    traceContext: r.trace_context,
    createdAt: new Date(r.created_at),
  };
}

/**
 * A claimed job's id and fencing token. Only a Running row holds a token (the claim sets a new one; every
 * move out of Running clears it), so `lease_token = token` is the whole fence of a write-back. The
 * write-backs say no more on purpose: with `status = 'Running'` beside it the planner may walk the partial
 * index of Running rows for every batch, and between vacuums that index still holds every row that ran
 * since (20,000 jobs beside a million queued ones completed at 634/s instead of 37,642/s); on the token
 * alone it looks the batch up by primary key.
 */
export interface Completion {
  readonly id: string;
  readonly token: string;
}

/**
 * A batch's rows in ascending id order. Each batch write below walks its arrays in order, looking every
 * job up by primary key, so it locks the rows in the order given: two batches over the same jobs (a
 * completion and a lease renewal of one worker, say) in different orders deadlocked, and PostgreSQL
 * aborted one after a second's wait. In one order they queue instead.
 */
function inIdOrder<T extends Completion>(rows: readonly T[]): T[] {
  return [...rows].sort((a, b) => {
    const x = BigInt(a.id);
    const y = BigInt(b.id);
    return x < y ? -1 : x > y ? 1 : 0;
  });
}

/**
 * A batch write-back's rows: the batch's ids and tokens as parameters, and the condition the rows it
 * changes meet against the batch's `unnest` (`alias`, with `id` and `token` columns): each job looked up
 * by id (`id = ANY(…)`, so no plan scans the table) and changed only while the token it was claimed under
 * is still its own.
 */
function fenced(batch: readonly Completion[]) {
  const ids = bigints(batch.map((b) => b.id));
  return {
    ids,
    tokens: bigints(batch.map((b) => b.token)),
    where: (alias: string) =>
      sql`j.id = ANY(${ids}) AND j.id = ${raw(alias)}.id AND j.lease_token = ${raw(alias)}.token`,
  };
}

/** Marks jobs Succeeded; returns the ids whose token was still current (the rest are stale). */
export async function completeJobs(db: Queries, batch: readonly Completion[]): Promise<Set<string>> {
  if (batch.length === 0) return new Set();
  const fence = fenced(inIdOrder(batch));
  const rows = await db.any<{ id: string }>(sql`
    UPDATE job_reaper.jobs AS j
    SET status = 'Succeeded', completed_at = now(), lease_token = NULL, lease_expires_at = NULL,
        locked_by = NULL, last_error = NULL
    FROM unnest(${fence.ids}, ${fence.tokens}) AS c(id, token)
    WHERE ${fence.where("c")}
    RETURNING j.id::text`);
  return new Set(rows.map((r) => r.id));
}

export interface Failure extends Completion {
  readonly error: string;
  /** When the next attempt may run, if attempts remain. */
  readonly retryAt: Date;
  /** No further attempt can succeed: dead-letter now, whatever attempts remain. */
  readonly final?: boolean;
}

/**
 * Records failed attempts: back to Pending at `retryAt` while attempts remain, else Failed (a dead
 * letter). Returns the ids whose token was still current, with the state each went to.
 */
export async function failJobs(db: Queries, batch: readonly Failure[]): Promise<Map<string, JobStatus>> {
  if (batch.length === 0) return new Map();
  const failed = inIdOrder(batch);
  const fence = fenced(failed);
  const rows = await db.any<{ id: string; status: JobStatus }>(sql`
    UPDATE job_reaper.jobs AS j
    SET status = CASE WHEN j.attempts >= j.max_attempts OR f.final THEN 'Failed' ELSE 'Pending' END,
        run_at = CASE WHEN j.attempts >= j.max_attempts OR f.final THEN j.run_at ELSE f.retry_at END,
        completed_at = CASE WHEN j.attempts >= j.max_attempts OR f.final THEN now() ELSE NULL END,
        last_error = left(f.error, 2000),
        lease_token = NULL, lease_expires_at = NULL, locked_by = NULL, waiting_on = NULL
    FROM unnest(
      ${fence.ids},
      ${fence.tokens},
      ${failed.map((f) => f.error)}::text[],
      ${failed.map((f) => f.retryAt.toISOString())}::timestamptz[],
      ${failed.map((f) => f.final === true)}::boolean[]
    ) AS f(id, token, error, retry_at, final)
    WHERE ${fence.where("f")}
    RETURNING j.id::text, j.status`);
  return new Map(rows.map((r) => [r.id, r.status]));
}

export interface Deferral extends Completion {
  readonly reason: string;
  /** When the job may run again. */
  readonly runAt: Date;
  /** What it waits on, when something can wake it earlier (`wakeJobsWaitingOn`). */
  readonly waitingOn?: string;
}

/**
 * Puts jobs back to Pending at a later time without spending an attempt: the claim counted one, this
 * takes it back. For a job that did not try (its receiver's circuit is open), not one that failed.
 */
export async function deferJobs(db: Queries, batch: readonly Deferral[]): Promise<Set<string>> {
  if (batch.length === 0) return new Set();
  const deferred = inIdOrder(batch);
  const fence = fenced(deferred);
  const rows = await db.any<{ id: string }>(sql`
    UPDATE job_reaper.jobs AS j
    SET status = 'Pending', attempts = greatest(j.attempts - 1, 0), run_at = d.run_at,
        last_error = left(d.reason, 2000), lease_token = NULL, lease_expires_at = NULL, locked_by = NULL,
        started_at = NULL, waiting_on = d.waiting_on
    FROM unnest(
      ${fence.ids},
      ${fence.tokens},
      ${deferred.map((d) => d.reason)}::text[],
      ${deferred.map((d) => d.runAt.toISOString())}::timestamptz[],
      ${deferred.map((d) => d.waitingOn ?? null)}::text[]
    ) AS d(id, token, reason, run_at, waiting_on)
    WHERE ${fence.where("d")}
    RETURNING j.id::text`);
  return new Set(rows.map((r) => r.id));
}

/**
 * Makes every pending job deferred on `waitingOn` (a receiver's circuit that closed again) due now, and
 * tells the workers of their types at once. Returns how many it woke.
 */
export async function wakeJobsWaitingOn(db: Queries, waitingOn: string): Promise<number> {
  return (await runPendingJobsNow(db, { waitingOn })).length;
}

/**
 * Gives claimed but unstarted jobs back (graceful shutdown): Pending again, the attempt not counted, and
 * other workers told at once.
 */
export async function releaseJobs(db: Queries, type: string, batch: readonly Completion[]): Promise<number> {
  if (batch.length === 0) return 0;
  const fence = fenced(inIdOrder(batch));
  const rows = await db.any<{ id: string }>(sql`
    UPDATE job_reaper.jobs AS j
    SET status = 'Pending', attempts = j.attempts - 1, lease_token = NULL, lease_expires_at = NULL,
        locked_by = NULL, started_at = NULL
    FROM unnest(${fence.ids}, ${fence.tokens}) AS c(id, token)
    WHERE ${fence.where("c")}
    RETURNING j.id::text`);
  if (rows.length > 0) await notifyWorkers(db, [type]);
  return rows.length;
}

/** Extends the leases of many held jobs at once; returns the ids whose token was still current. */
export async function renewLeases(
  db: Queries,
  batch: readonly Completion[],
  leaseMs: number,
): Promise<Set<string>> {
  if (batch.length === 0) return new Set();
  const fence = fenced(inIdOrder(batch));
  const rows = await db.any<{ id: string }>(sql`
    UPDATE job_reaper.jobs AS j
    SET lease_expires_at = now() + make_interval(secs => ${leaseMs / 1000})
    FROM unnest(${fence.ids}, ${fence.tokens}) AS c(id, token)
    WHERE ${fence.where("c")}
    RETURNING j.id::text`);
  return new Set(rows.map((r) => r.id));
}

export interface ReapResult {
  /** Expired leases with attempts left, made claimable again. */
  readonly released: number;
  /** Expired leases with attempts exhausted, now Failed. */
  readonly failed: number;
}

/** How often a worker writes its heartbeat, and after how long without one its claims are released. */
export const WORKER_HEARTBEAT_MS = 2_000;
export const WORKER_DEAD_AFTER_SECONDS = 10;

/** A worker says it is alive. */
export async function heartbeat(db: Queries, workerId: string): Promise<void> {
  await db.query(sql`
    INSERT INTO job_reaper.workers (worker_id, heartbeat_at) VALUES (${workerId}, now())
    ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now()`);
}

/** A worker that stopped gracefully is forgotten (it released what it held). */
export async function forgetWorker(db: Queries, workerId: string): Promise<void> {
  await db.query(sql`DELETE FROM job_reaper.workers WHERE worker_id = ${workerId}`);
}

/**
 * The reaper's sweep: expired leases, and the claims of a worker that has not written its heartbeat for
 * WORKER_DEAD_AFTER_SECONDS (a process that died), become Pending again (reclaimable at once, the old token
 * stale) or, with attempts exhausted, Failed for good. Idempotent and safe to run from every replica at
 * once: rows are locked with SKIP LOCKED and each row's new state depends only on the row.
 */
export async function reapExpiredLeases(db: Queries, limit = 1_000): Promise<ReapResult> {
  const rows = await db.any<{ status: JobStatus; type: string }>(sql`
    WITH expired AS (
      SELECT id FROM job_reaper.jobs AS r
      WHERE status = 'Running'
        AND (lease_expires_at < now()
          OR NOT EXISTS (
            SELECT 1 FROM job_reaper.workers AS w
            WHERE w.worker_id = r.locked_by
              AND w.heartbeat_at > now() - make_interval(secs => ${WORKER_DEAD_AFTER_SECONDS})))
      ORDER BY lease_expires_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE job_reaper.jobs AS j
    SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'Failed' ELSE 'Pending' END,
        run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at ELSE now() END,
        completed_at = CASE WHEN j.attempts >= j.max_attempts THEN now() ELSE NULL END,
        last_error = CASE WHEN j.lease_expires_at < now()
          THEN 'lease expired (worker ' || coalesce(j.locked_by, 'unknown') || ')'
          ELSE 'worker ' || coalesce(j.locked_by, 'unknown') || ' stopped (no heartbeat)' END,
        lease_token = NULL, lease_expires_at = NULL, locked_by = NULL
    FROM expired
    WHERE j.id = expired.id
    RETURNING j.status, j.type`);
  await notifyWorkers(
    db,
    rows.filter((r) => r.status === "Pending").map((r) => r.type),
  );
  return {
    released: rows.filter((r) => r.status === "Pending").length,
    failed: rows.filter((r) => r.status === "Failed").length,
  };
}

/** A dead letter (a Failed job) not announced yet. */
export interface DeadLetter {
  readonly id: string;
  readonly type: string;
  readonly workspaceKey: string | null;
  readonly attempts: number;
  readonly lastError: string | null;
  /** The payload members asked for (`payloadFields`), as text; null where absent. */
  readonly fields: Readonly<Record<string, string | null>>;
}

/**
 * Announces dead letters once each: takes up to `limit` Failed jobs not announced yet (SKIP LOCKED:
 * replicas share the work), hands them to `announce`, and marks them announced in the same transaction,
 * so a crash in between announces them again (`announce` must be idempotent per job). Only the payload
 * members named in `payloadFields` are read, never a whole payload. Returns how many it took.
 */
export async function announceDeadLetters(
  db: Db,
  options: { readonly limit: number; readonly payloadFields?: readonly string[] },
  announce: (deadLetters: readonly DeadLetter[]) => Promise<void>,
): Promise<number> {
  const names = options.payloadFields ?? [];
  return db.transaction(async (tx) => {
    const rows = await tx.any<{
      id: string;
      type: string;
      workspace_key: string | null;
      attempts: number;
      last_error: string | null;
      fields: Array<string | null>;
    }>(sql`
      SELECT id::text AS id, type, workspace_key, attempts, last_error,
             ARRAY(SELECT payload->>f FROM unnest(${names}::text[]) WITH ORDINALITY AS n(f, i) ORDER BY i) AS fields
      FROM job_reaper.jobs
      WHERE status = 'Failed' AND announced_at IS NULL
      ORDER BY id LIMIT ${options.limit} FOR UPDATE SKIP LOCKED`);
    if (rows.length === 0) return 0;
    await announce(
      rows.map((r) => ({
        id: r.id,
        type: r.type,
        workspaceKey: r.workspace_key,
        attempts: r.attempts,
        lastError: r.last_error,
        fields: Object.fromEntries(names.map((name, i) => [name, r.fields[i] ?? null])),
      })),
    );
    await tx.query(
      sql`UPDATE job_reaper.jobs SET announced_at = now() WHERE id = ANY(${rows.map((r) => r.id)}::bigint[])`,
    );
    return rows.length;
  });
}

/**
 * Deletes the jobs that ended (Succeeded, or Failed and announced) before `before`: walks the table in id
 * order from the oldest job, `batch` rows at a time, and stops at the first batch that reaches a job made
 * at `before` or later (none after it can have ended earlier). A job still waiting or running, however
 * old, stays. Each deletion checks the row as it is when it is deleted, so a dead letter an operator puts
 * back meanwhile is kept. Stops after the batch in hand when `signal` is aborted. Returns how many it
 * deleted.
 */
export async function deleteEndedJobs(
  db: Queries,
  before: Date,
  { signal, batch = 5_000 }: SweepOptions = {},
): Promise<number> {
  let deleted = 0;
  for (let after = "0"; ;) {
    const row = await db.one<{ deleted: number; last_id: string | null; reached: boolean | null }>(sql`
      WITH walked AS (
        SELECT id, created_at FROM job_reaper.jobs WHERE id > ${after}::bigint ORDER BY id LIMIT ${batch}
      ), gone AS (
        DELETE FROM job_reaper.jobs j USING walked w
        WHERE j.id = w.id AND j.completed_at < ${before}
          AND (j.status = 'Succeeded' OR (j.status = 'Failed' AND j.announced_at IS NOT NULL))
        RETURNING j.id
      )
      SELECT (SELECT count(*)::int FROM gone) AS deleted, (SELECT max(id)::text FROM walked) AS last_id,
             (SELECT max(created_at) FROM walked) >= ${before} AS reached`);
    deleted += row.deleted;
    if (row.last_id === null || row.reached === true || signal?.aborted) return deleted;
    after = row.last_id;
  }
}

export interface ListFilter {
  readonly status?: JobStatus;
  readonly type?: string;
  /** Exact workspace filter (a caller's own scope, or an operator's choice). */
  readonly workspaceKey?: string;
  /** Return ids below this one (the cursor). */
  readonly beforeId?: string;
  readonly limit: number;
}

interface JobRow {
  id: string;
  type: string;
  status: JobStatus;
  workspace_key: string | null;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  last_error: string | null;
}

/** Newest first, keyset-paged by id (stable while jobs are added). */
export async function listJobs(db: Queries, filter: ListFilter): Promise<JobView[]> {
  // Only the filters given, so that each combination is a statement of its own with a plan of its own
  // (a generic plan of "($1 IS NULL OR status = $1)" cannot use an index): each filter has an index path
  // (migration 0006; `make bench-jobs-list`).
  const conditions = [
    ...(filter.status === undefined ? [] : [sql`status = ${filter.status}`]),
    ...(filter.type === undefined ? [] : [sql`type = ${filter.type}`]),
    ...(filter.workspaceKey === undefined ? [] : [sql`workspace_key = ${filter.workspaceKey}`]),
    ...(filter.beforeId === undefined ? [] : [sql`j.id < ${filter.beforeId}::bigint`]),
  ];
  const rows = await db.any<JobRow>(sql`
    SELECT j.id::text AS id, type, status, workspace_key, attempts, max_attempts, run_at, created_at,
           started_at, completed_at, last_error
    FROM job_reaper.jobs j
    ${conditions.length === 0 ? empty : sql`WHERE ${join(conditions, " AND ")}`}
    -- j.id, the bigint column: a bare "id" would name the text output column and sort "99" before "100".
    ORDER BY j.id DESC
    LIMIT ${filter.limit}`);
  return rows.map(viewOf);
}

const viewOf = (r: JobRow): JobView => ({
  id: r.id,
  type: r.type,
  status: r.status,
  workspaceKey: r.workspace_key,
  attempts: r.attempts,
  maxAttempts: r.max_attempts,
  scheduledAtUtc: r.run_at.toISOString(),
  createdAtUtc: r.created_at.toISOString(),
  startedAtUtc: r.started_at?.toISOString() ?? null,
  completedAtUtc: r.completed_at?.toISOString() ?? null,
  lastError: r.last_error,
});

/** What an operator's action on one job found: the job as it is now, no such job, or a status it refuses. */
export type JobActionOutcome =
  { readonly job: JobView } | { readonly missing: true } | { readonly status: JobStatus };

const JOB_COLUMNS = sql`id, type, status, workspace_key, attempts, max_attempts, run_at, created_at, started_at,
                completed_at, last_error`;

/**
 * Changes one job that is in `from` (`change`, the SET list), optionally waking its type's workers, and
 * answers as `JobActionOutcome`. `workspaceKey` keeps the search to one workspace's jobs (a workspace
 * session's): another's is missing, as if absent.
 */
async function changeOneJob(
  db: Queries,
  id: string,
  workspaceKey: string | undefined,
  from: JobStatus,
  change: Sql,
  wake: boolean,
): Promise<JobActionOutcome> {
  const inWorkspace = workspaceKey === undefined ? empty : sql`AND workspace_key = ${workspaceKey}`;
  const row = await db.maybeOne<JobRow>(sql`
    WITH changed AS (
      UPDATE job_reaper.jobs SET ${change}
      WHERE id = ${id}::bigint AND status = ${from} ${inWorkspace}
      RETURNING ${JOB_COLUMNS}
    ), woken AS (SELECT pg_notify(${NOTIFY_CHANNEL}, type) FROM changed WHERE ${wake})
    SELECT c.id::text AS id, c.type, c.status, c.workspace_key, c.attempts, c.max_attempts, c.run_at,
           c.created_at, c.started_at, c.completed_at, c.last_error
    FROM changed c LEFT JOIN woken ON true`);
  if (row !== null) return { job: viewOf(row) };
  const found = await db.maybeOne<{ status: JobStatus }>(sql`
    SELECT status FROM job_reaper.jobs WHERE id = ${id}::bigint ${inWorkspace}`);
  return found === null ? { missing: true } : { status: found.status };
}

/**
 * A dead letter (a Failed job) made due again, for one more attempt: Pending now, its attempts kept and
 * its budget one more than it has used (at most 100), its dead-letter announcement reset so that another
 * failure is announced again. Workers are woken at once. `workspaceKey` keeps the search to one
 * workspace's jobs (a workspace session's). Returns the job as it is now, `missing` when there is no such
 * job, or its status when it is not Failed.
 */
export async function retryDeadLetter(
  db: Queries,
  id: string,
  workspaceKey: string | undefined,
): Promise<JobActionOutcome> {
  return changeOneJob(
    db,
    id,
    workspaceKey,
    "Failed",
    sql`status = 'Pending', run_at = now(), max_attempts = GREATEST(max_attempts, LEAST(attempts + 1, 100)),
        completed_at = NULL, announced_at = NULL, lease_token = NULL, lease_expires_at = NULL, locked_by = NULL`,
    true,
  );
}

/**
 * A waiting job (Pending: not yet started, or waiting out a retry's backoff or a receiver's circuit) made
 * due now, its workers woken at once; its attempts and budget are unchanged. Refuses any other status.
 */
export async function runJobNow(
  db: Queries,
  id: string,
  workspaceKey: string | undefined,
): Promise<JobActionOutcome> {
  return changeOneJob(db, id, workspaceKey, "Pending", sql`run_at = now(), waiting_on = NULL`, true);
}

/**
 * A waiting job (Pending) ended by an operator: Failed, so a dead letter that `retryDeadLetter` can bring
 * back, with `reason` as its last error. It is not announced as a dead letter (no event, no notification):
 * the operator who ended it knows. A job already running is refused (its worker holds the lease).
 */
export async function cancelJob(
  db: Queries,
  id: string,
  workspaceKey: string | undefined,
  reason: string,
): Promise<JobActionOutcome> {
  return changeOneJob(
    db,
    id,
    workspaceKey,
    "Pending",
    sql`status = 'Failed', completed_at = now(), announced_at = now(), last_error = ${reason},
        waiting_on = NULL, lease_token = NULL, lease_expires_at = NULL, locked_by = NULL`,
    false,
  );
}

/** Which waiting jobs `runPendingJobsNow` makes due: each field given narrows the set. */
export interface PendingSelection {
  readonly type?: string;
  readonly workspaceKey?: string | null;
  /** Only jobs that have spent exactly this many attempts. */
  readonly attempts?: number;
  /** Only jobs deferred until this (a receiver's circuit) recovers. */
  readonly waitingOn?: string;
}

/**
 * Makes every waiting (Pending) job of a selection due now and wakes their workers: what an operator's
 * script or a test does instead of waiting out a backoff. Returns the ids it moved.
 */
export async function runPendingJobsNow(db: Queries, selection: PendingSelection = {}): Promise<string[]> {
  const conditions = [
    sql`status = 'Pending'`,
    ...(selection.type === undefined ? [] : [sql`type = ${selection.type}`]),
    ...(selection.workspaceKey === undefined
      ? []
      : [
          selection.workspaceKey === null
            ? sql`workspace_key IS NULL`
            : sql`workspace_key = ${selection.workspaceKey}`,
        ]),
    ...(selection.attempts === undefined ? [] : [sql`attempts = ${selection.attempts}`]),
    ...(selection.waitingOn === undefined ? [] : [sql`waiting_on = ${selection.waitingOn}`]),
  ];
  const rows = await db.any<{ id: string; type: string }>(sql`
    UPDATE job_reaper.jobs SET run_at = now(), waiting_on = NULL
    WHERE ${join(conditions, " AND ")}
    RETURNING id::text, type`);
  await notifyWorkers(
    db,
    rows.map((r) => r.type),
  );
  return rows.map((r) => r.id);
}

/**
 * When the job enqueued with this idempotency key runs next: its due time while it waits (Pending), null
 * once it runs, ended or was never enqueued.
 */
export async function nextRunOfKeyedJob(
  db: Queries,
  type: string,
  idempotencyKey: string,
): Promise<Date | null> {
  const row = await db.maybeOne<{ run_at: Date }>(sql`
    SELECT run_at FROM job_reaper.jobs
    WHERE type = ${type} AND idempotency_key = ${idempotencyKey} AND status = 'Pending'`);
  return row?.run_at ?? null;
}

/** The payload and workspace of the job enqueued with this idempotency key (null when there is none). */
export async function keyedJob(
  db: Queries,
  type: string,
  idempotencyKey: string,
): Promise<{ payload: unknown; workspaceKey: string | null } | null> {
  const row = await db.maybeOne<{ payload: unknown; workspace_key: string | null }>(sql`
    SELECT payload, workspace_key FROM job_reaper.jobs
    WHERE type = ${type} AND idempotency_key = ${idempotencyKey}`);
  return row === null ? null : { payload: row.payload, workspaceKey: row.workspace_key };
}

/**
 * Which of these idempotency keys name a job of `type` that has ended as a dead letter (Failed): cancelled
 * by an operator, or failed with no attempt left, also where no handler saw its end (a lease that expired
 * on its last attempt). What a job's owner reads to settle its own record of the job.
 */
export async function failedKeyedJobs(
  db: Queries,
  type: string,
  idempotencyKeys: readonly string[],
): Promise<Set<string>> {
  if (idempotencyKeys.length === 0) return new Set();
  const rows = await db.any<{ idempotency_key: string }>(sql`
    SELECT idempotency_key FROM job_reaper.jobs
    WHERE type = ${type} AND idempotency_key = ANY(${idempotencyKeys}::text[]) AND status = 'Failed'`);
  return new Set(rows.map((r) => r.idempotency_key));
}

/**
 * Dead letters (Failed jobs) of `type` that ended at `since` or later, oldest first after job `afterId`,
 * up to `limit`: their ids, idempotency keys and payloads. What a job's owner pages through to settle its
 * own records of them.
 */
export async function failedJobsOfType(
  db: Queries,
  type: string,
  since: Date,
  afterId: string,
  limit: number,
): Promise<Array<{ id: string; idempotencyKey: string | null; payload: unknown }>> {
  const rows = await db.any<{ id: string; idempotency_key: string | null; payload: unknown }>(sql`
    SELECT id::text, idempotency_key, payload FROM job_reaper.jobs
    WHERE status = 'Failed' AND id > ${afterId}::bigint AND type = ${type} AND completed_at >= ${since}
    ORDER BY id LIMIT ${limit}`);
  return rows.map((r) => ({ id: r.id, idempotencyKey: r.idempotency_key, payload: r.payload }));
}

/**
 * A deleted workspace's jobs, made before `before`, are no longer its: their workspace tag is cleared, so
 * a workspace made again under the same key does not list, retry or cancel them (platform sessions still
 * see them, as they see every job). Jobs waiting or running go on as they would (a delivery for a removed
 * subscription does nothing). Returns how many it released.
 */
export async function releaseWorkspaceJobs(db: Queries, workspaceKey: string, before: Date): Promise<number> {
  const result = await db.query(sql`
    UPDATE job_reaper.jobs SET workspace_key = NULL
    WHERE workspace_key = ${workspaceKey} AND created_at <= ${before}`);
  return result.rowCount ?? 0;
}

/** Counts by type and status, for the queue-depth gauge. */
export async function queueDepth(
  db: Queries,
): Promise<Array<{ type: string; status: JobStatus; count: number }>> {
  return db.any(sql`SELECT type, status, count(*)::int AS count FROM job_reaper.jobs GROUP BY type, status`);
}
