/**
 * The job engine on real PostgreSQL: the spec's state transitions, fencing tokens, the reaper,
 * the backoff schedule, a worker process killed or frozen mid-job, concurrency, dead letters and the
 * jobs list's visibility by scope.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

import { connect } from "@nats-io/transport-node";
import { Bus, type Principal } from "@svc/bus";
import { jobRoutes, type QueryOf, requestRoute } from "@svc/contracts";
import { createDb, type Db, sql } from "@svc/db";
import {
  cancelJob,
  createJobMetrics,
  DeferJobError,
  defineJob,
  deleteEndedJobs,
  enqueue,
  enqueueMany,
  JobStatus,
  JobWorker,
  type ListFilter,
  listJobs,
  noopJob,
  reapExpiredLeases,
  retryDeadLetter,
  runJobNow,
  runPendingJobsNow,
} from "@svc/jobs";
import { createLogger, Registry } from "@svc/observability";
import { GatewayPrincipalSigner } from "@svc/runtime";
import { jobReaperService } from "@svc/service-job-reaper";
import { deliverJob } from "@svc/service-webhook-dispatcher";
import pg from "pg";
import { afterAll, beforeEach, describe, expect, it, onTestFinished } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
// Internal SQL of the engine, reached by path: the tests drive single transitions directly.
import { claimJobs, completeJobs, failJobs, insertJobs } from "../shared/jobs/src/queries.js";
import { createHarness } from "./support/harness.js";
import { until } from "./support/wait.js";

const h = await createHarness({ seed: false });
const db: Db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 8, applicationName: "jobs-test" });
const log = createLogger("jobs-test", "silent");
const workers: JobWorker[] = [];
const children = new Set<ChildProcess>();

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await Promise.all(workers.map((w) => w.stop()));
  await h.stopAll();
  await db.end();
});

beforeEach(async () => {
  await db.query(sql`TRUNCATE job_reaper.jobs`);
});

interface Row {
  status: JobStatus;
  attempts: number;
  max_attempts: number;
  lease_token: string | null;
  last_error: string | null;
  run_at: Date;
  completed_at: Date | null;
  delay_ms: number;
}

async function row(id: string): Promise<Row> {
  return db.one<Row>(sql`
    SELECT status, attempts, max_attempts, lease_token::text, last_error, run_at, completed_at,
           (extract(epoch FROM run_at - now()) * 1000)::int AS delay_ms
    FROM job_reaper.jobs WHERE id = ${id}`);
}

/**
 * A pool of its own whose claim statements (the ones with SKIP LOCKED) are counted, with the most that
 * were out at once; `holdMs` holds each claim's answer back that long after PostgreSQL gave it.
 */
function claimCountingDb(applicationName: string, maximumPoolSize = 2, holdMs = 0) {
  const counted = createDb({ databaseUrl: h.db.url, maximumPoolSize, applicationName });
  const claims = { count: 0, inFlight: 0, mostAtOnce: 0 };
  const query = counted.pool.query.bind(counted.pool) as (...args: unknown[]) => unknown;
  (counted.pool as { query: unknown }).query = (...args: unknown[]) => {
    const text = (args[0] as { text?: string } | string | undefined) ?? "";
    if (!(typeof text === "string" ? text : (text.text ?? "")).includes("SKIP LOCKED")) return query(...args);
    claims.count++;
    claims.mostAtOnce = Math.max(claims.mostAtOnce, ++claims.inFlight);
    return Promise.resolve(query(...args))
      .then(async (result) => {
        if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
        return result;
      })
      .finally(() => claims.inFlight--);
  };
  return { db: counted, claims };
}

function newWorker(options: Partial<ConstructorParameters<typeof JobWorker>[0]> = {}) {
  const worker = new JobWorker({
    db,
    databaseUrl: h.db.url,
    workerId: `w${workers.length}`,
    log,
    ...options,
  });
  workers.push(worker);
  return worker;
}

describe("transitions", () => {
  it("Pending → claim → Running with a lease and a fresh token; success → Succeeded", async () => {
    const { id } = await enqueue(db, noopJob, {});
    expect((await row(id)).status).toBe(JobStatus.Pending);
    const [claimed] = await claimJobs(db, "noop", 10, 300_000, "t");
    expect(claimed).toMatchObject({ id, attempt: 1 });
    const running = await row(id);
    expect(running.status).toBe(JobStatus.Running);
    expect(running.lease_token).toBe(claimed?.token);
    const leaseMs = (claimed?.leaseExpiresAt.getTime() ?? 0) - Date.now();
    expect(leaseMs).toBeGreaterThan(290_000);
    expect(leaseMs).toBeLessThanOrEqual(300_000);
    expect(await completeJobs(db, [{ id, token: claimed?.token as string }])).toEqual(new Set([id]));
    expect(await row(id)).toMatchObject({ status: JobStatus.Succeeded, lease_token: null });
  });

  it("a claim made inside a caller's unit of work commits on its own and leaves the caller's commit synchronous", async () => {
    const { id } = await enqueue(db, noopJob, {});
    const seen = await db
      .unitOfWork(async (tx) => {
        await tx.query(sql`SELECT 1`);
        const claimed = await claimJobs(db, "noop", 1, 60_000, "t");
        const setting = await tx.one<{ synchronous_commit: string }>(sql`SHOW synchronous_commit`);
        throw Object.assign(new Error("the caller rolls back"), { seen: { claimed, setting } });
      })
      .catch(
        (error: { seen: { claimed: unknown[]; setting: { synchronous_commit: string } } }) => error.seen,
      );
    expect(seen.claimed).toHaveLength(1);
    expect(seen.setting.synchronous_commit).toBe("on");
    // The caller's rollback did not take the claim with it.
    expect((await row(id)).status).toBe(JobStatus.Running);
  });

  it("a failure with attempts left goes back to Pending with backoff and keeps the error", async () => {
    const { id } = await enqueue(db, noopJob, {}, { maxAttempts: 3 });
    const [c] = await claimJobs(db, "noop", 1, 60_000, "t");
    const retryAt = new Date(Date.now() + 30_000);
    const states = await failJobs(db, [{ id, token: c?.token as string, error: "boom", retryAt }]);
    expect(states.get(id)).toBe(JobStatus.Pending);
    const r = await row(id);
    expect(r).toMatchObject({
      status: JobStatus.Pending,
      attempts: 1,
      last_error: "boom",
      lease_token: null,
    });
    expect(Math.abs(r.run_at.getTime() - retryAt.getTime())).toBeLessThan(5);
    // Not due yet: nothing to claim.
    expect(await claimJobs(db, "noop", 1, 60_000, "t")).toEqual([]);
  });

  it("the database refuses a job type outside the pattern, also past the library's own checks", async () => {
    const job = {
      payload: {},
      workspaceKey: null,
      maxAttempts: 1,
      runAt: null,
      idempotencyKey: null,
      traceContext: null,
    };
    for (const type of ["Upper", "has space", "", "-leading", "x".repeat(101)]) {
      await expect(insertJobs(db, [{ ...job, type }])).rejects.toMatchObject({ code: "23514" });
    }
    const [made] = await insertJobs(db, [{ ...job, type: "a.b_c-9" }]);
    // Claims and write-backs leave the type as it was written (the check runs where it is assigned).
    const [claimed] = await claimJobs(db, "a.b_c-9", 1, 60_000, "w");
    expect(claimed?.id).toBe(made?.id);
    expect(await completeJobs(db, [{ id: made?.id as string, token: claimed?.token as string }])).toEqual(
      new Set([made?.id]),
    );
  });

  it("a write-back names each job by one id: a list in one id is refused, not read as several", async () => {
    const [a, b] = await enqueueMany(db, [noopJob.request({}), noopJob.request({})]);
    const claimed = await claimJobs(db, noopJob.type, 2, 60_000, "w");
    const token = claimed[0]?.token as string;
    await expect(completeJobs(db, [{ id: `${a?.id},${b?.id}`, token }])).rejects.toThrow(TypeError);
    await expect(completeJobs(db, [{ id: a?.id as string, token: `${token},1` }])).rejects.toThrow(TypeError);
    expect((await row(a?.id as string)).status).toBe(JobStatus.Running);
    expect((await row(b?.id as string)).status).toBe(JobStatus.Running);
  });

  it("a failure at max attempts is a dead letter that is never claimed again", async () => {
    const { id } = await enqueue(db, noopJob, {}, { maxAttempts: 1 });
    const [c] = await claimJobs(db, "noop", 1, 60_000, "t");
    await failJobs(db, [{ id, token: c?.token as string, error: "fatal", retryAt: new Date() }]);
    expect(await row(id)).toMatchObject({ status: JobStatus.Failed, attempts: 1, last_error: "fatal" });
    expect(await claimJobs(db, "noop", 1, 60_000, "t")).toEqual([]);
  });

  it("an expired lease with attempts left is released by the reaper and the old token is stale", async () => {
    const { id } = await enqueue(db, noopJob, {}, { maxAttempts: 3 });
    const [first] = await claimJobs(db, "noop", 1, 100, "first");
    await new Promise((r) => setTimeout(r, 150));
    expect(await reapExpiredLeases(db)).toEqual({ released: 1, failed: 0 });
    expect((await row(id)).status).toBe(JobStatus.Pending);
    const [second] = await claimJobs(db, "noop", 1, 60_000, "second");
    expect(second?.attempt).toBe(2);
    expect(BigInt(second?.token as string)).toBeGreaterThan(BigInt(first?.token as string));
    // The first worker's late write-back is refused; the second's counts.
    expect(await completeJobs(db, [{ id, token: first?.token as string }])).toEqual(new Set());
    expect((await row(id)).status).toBe(JobStatus.Running);
    expect(await completeJobs(db, [{ id, token: second?.token as string }])).toEqual(new Set([id]));
    expect((await row(id)).status).toBe(JobStatus.Succeeded);
  });

  it("an expired lease with attempts exhausted is failed by the reaper and never reclaimed", async () => {
    const { id } = await enqueue(db, noopJob, {}, { maxAttempts: 1 });
    await claimJobs(db, "noop", 1, 50, "t");
    await new Promise((r) => setTimeout(r, 100));
    expect(await reapExpiredLeases(db)).toEqual({ released: 0, failed: 1 });
    expect(await row(id)).toMatchObject({ status: JobStatus.Failed });
    expect((await row(id)).last_error).toMatch(/lease expired/);
    expect(await claimJobs(db, "noop", 1, 60_000, "t")).toEqual([]);
    expect(await reapExpiredLeases(db)).toEqual({ released: 0, failed: 0 });
  });

  it("a batch write locks its jobs in id order: two batches over the same jobs queue, never deadlock", async () => {
    await enqueueMany(db, [noopJob.request({}), noopJob.request({})]);
    const claimed = await claimJobs(db, "noop", 10, 300_000, "t");
    const [first, second] = claimed
      .map((c) => ({ id: c.id, token: c.token }))
      .sort((x, y) => Number(BigInt(x.id) - BigInt(y.id)));
    if (first === undefined || second === undefined) throw new Error("two jobs were not claimed");
    // Another writer (a connection of its own) holds the lower job; a completion given the higher one
    // first must wait for it before it takes the higher one, so the other writer can still take the
    // higher one. Had the completion locked in the order given, the two would wait on each other.
    const holder = new pg.Client({ connectionString: h.db.url });
    await holder.connect();
    onTestFinished(() => holder.end());
    await holder.query("BEGIN");
    await holder.query("SELECT id FROM job_reaper.jobs WHERE id = $1 FOR UPDATE", [first.id]);
    // On a table of any size the planner walks the batch's arrays and looks each job up by primary key;
    // on this test's few rows it would rather scan the table, so it is told what it does at scale.
    const options = encodeURIComponent(
      "-c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off",
    );
    const atScale = createDb({
      databaseUrl: `${h.db.url}${h.db.url.includes("?") ? "&" : "?"}options=${options}`,
      maximumPoolSize: 1,
      applicationName: "jobs-order",
    });
    onTestFinished(() => atScale.end());
    const completing = completeJobs(atScale, [second, first]).catch((e: Error) => e);
    await until(async () => {
      // (pg_stat_activity is read once per transaction unless its snapshot is cleared.)
      await holder.query("SELECT pg_stat_clear_snapshot()");
      const waiting = await holder.query(
        "SELECT 1 FROM pg_stat_activity WHERE application_name = 'jobs-order' AND wait_event_type = 'Lock'",
      );
      return waiting.rows.length > 0;
    });
    await holder.query("SET LOCAL lock_timeout = '3s'");
    const other = await holder
      .query("UPDATE job_reaper.jobs SET lease_expires_at = lease_expires_at WHERE id = $1", [second.id])
      .then(
        () => "took the higher job",
        (e: Error) => e.message,
      );
    await holder.query(other === "took the higher job" ? "COMMIT" : "ROLLBACK");
    expect(other).toBe("took the higher job");
    expect(await completing).toEqual(new Set([first.id, second.id]));
  });

  it("enqueueing the same idempotency key twice makes one job", async () => {
    const a = await enqueue(db, noopJob, { n: 1 }, { idempotencyKey: "k-1" });
    const b = await enqueue(db, noopJob, { n: 2 }, { idempotencyKey: "k-1" });
    expect(a.created).toBe(true);
    expect(b).toEqual({ id: a.id, created: false });
    const many = await enqueueMany(db, [
      noopJob.request({}, { idempotencyKey: "k-1" }),
      noopJob.request({}, { idempotencyKey: "k-2" }),
      noopJob.request({}),
    ]);
    expect(many[0]).toEqual({ id: a.id, created: false });
    expect(many[1]?.created).toBe(true);
    expect(many[2]?.created).toBe(true);
    expect(await db.one(sql`SELECT count(*)::int AS n FROM job_reaper.jobs`)).toEqual({ n: 3 });
  });
});

describe("the worker", () => {
  it("retries with exponential backoff from 30 s, doubling, then dead-letters", async () => {
    const { id } = await enqueue(db, noopJob, {}, { maxAttempts: 5 });
    const worker = newWorker({ pollIntervalMs: 50 });
    worker.register(noopJob, {
      handler: async () => {
        throw new Error("receiver said no");
      },
    });
    await worker.start();
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      await until(async () => {
        const r = await row(id);
        return r.attempts === attempt && r.status === JobStatus.Pending;
      });
      delays.push((await row(id)).delay_ms);
      // Make it due now instead of waiting: the schedule is what was asserted.
      await runJobNow(db, id, undefined);
    }
    await until(async () => (await row(id)).status === JobStatus.Failed);
    const nominal = [30_000, 60_000, 120_000, 240_000];
    delays.forEach((delay, i) => {
      expect(delay).toBeGreaterThan((nominal[i] as number) * 0.9 - 1_000);
      expect(delay).toBeLessThan((nominal[i] as number) * 1.1 + 100);
    });
    expect(await row(id)).toMatchObject({
      status: JobStatus.Failed,
      attempts: 5,
      last_error: "Error: receiver said no",
    });
    expect(worker.stats).toMatchObject({ retried: 4, dead: 1 });
    await worker.stop();
  });

  it("concurrent workers never run one job twice", async () => {
    await db.query(
      sql`CREATE TABLE IF NOT EXISTS public.job_runs (job_id bigint NOT NULL, worker text NOT NULL)`,
    );
    await db.query(sql`TRUNCATE public.job_runs`);
    await enqueueMany(
      db,
      Array.from({ length: 300 }, (_, n) => noopJob.request({ n })),
    );
    const started = [newWorker(), newWorker(), newWorker()].map((w, i) => {
      w.register(noopJob, {
        concurrency: 5,
        handler: async (job) => {
          await db.query(sql`INSERT INTO public.job_runs VALUES (${job.id}, ${`w${i}`})`);
        },
      });
      return w;
    });
    await Promise.all(started.map((w) => w.start()));
    await until(
      async () =>
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status = 'Succeeded'`,
          )
        ).n === 300,
    );
    const runs = await db.any<{ job_id: string; n: number }>(
      sql`SELECT job_id::text, count(*)::int AS n FROM public.job_runs GROUP BY job_id`,
    );
    expect(runs).toHaveLength(300);
    expect(runs.every((r) => r.n === 1)).toBe(true);
    const perWorker = await db.any<{ worker: string }>(sql`SELECT DISTINCT worker FROM public.job_runs`);
    expect(perWorker.length).toBeGreaterThan(1);
    await Promise.all(started.map((w) => w.stop()));
  });

  it("an idle worker makes only its slow-poll claims, not a busy loop", async () => {
    const { db: counted, claims } = claimCountingDb("idle-test");
    const worker = newWorker({ db: counted, pollIntervalMs: 500 });
    worker.register(noopJob, { concurrency: 4, handler: async () => undefined });
    worker.register(deliverJob, { concurrency: 4, handler: async () => undefined });
    await worker.start();
    // One job, so the lane has run, emptied its queue and gone idle again.
    await enqueue(db, noopJob, {});
    await until(async () => worker.stats.succeeded === 1);
    const before = claims.count;
    const started = Date.now();
    // Two lanes, one poll every 500 ms each: six polls take about 1.5 s (a slower machine, longer); the
    // busy loop made thousands a second.
    await until(async () => claims.count - before >= 6, 15_000);
    const elapsed = Date.now() - started;
    await worker.stop();
    await counted.end();
    expect(elapsed).toBeGreaterThanOrEqual(1_000);
  });

  it("a lane fed a few jobs at a time claims once per arrival, not once per finished job", async () => {
    const { db: counted, claims } = claimCountingDb("claims-test");
    // The slow poll is far away: every claim below is the start's, a notification's or a finished job's.
    const worker = newWorker({ db: counted, pollIntervalMs: 60_000 });
    worker.register(noopJob, {
      concurrency: 20,
      batchSize: 100,
      // Finishing at different moments, as deliveries to a receiver do.
      handler: () => new Promise((r) => setTimeout(r, 2 + Math.random() * 20)),
    });
    await worker.start();
    const before = claims.count;
    // 20 arrivals of 10 jobs each, one insert (and one NOTIFY) per arrival.
    for (let arrival = 0; arrival < 20; arrival++) {
      await enqueueMany(
        db,
        Array.from({ length: 10 }, () => noopJob.request({})),
      );
      await until(async () => worker.stats.succeeded === (arrival + 1) * 10, 15_000);
    }
    const made = claims.count - before;
    await worker.stop();
    await counted.end();
    // Each arrival is claimed by its notification; a finished job claims again only after a claim that
    // took all it asked for. Claiming after every finished job made about 180 here.
    expect(made).toBeGreaterThanOrEqual(20);
    expect(made).toBeLessThanOrEqual(60);
  });

  it("with short jobs piling up, a lane has a second claim out while the first one's jobs run, never a third", async () => {
    await enqueueMany(
      db,
      Array.from({ length: 3_000 }, (_, n) => noopJob.request({ n })),
    );
    const { db: counted, claims } = claimCountingDb("read-ahead-test", 6);
    const worker = newWorker({ db: counted, pollIntervalMs: 60_000 });
    const ran = new Set<string>();
    worker.register(noopJob, {
      concurrency: 10,
      batchSize: 100,
      handler: async (job) => void ran.add(job.id),
    });
    await worker.start();
    await until(async () => worker.stats.succeeded === 3_000, 30_000);
    await worker.stop();
    await counted.end();
    // One claim at a time left the slots idle while PostgreSQL answered; a third would only fill the queue.
    expect(claims.mostAtOnce).toBe(2);
    expect(ran.size).toBe(3_000);
    const states = await db.any<{ status: string; attempts: number; n: number }>(
      sql`SELECT status, attempts, count(*)::int AS n FROM job_reaper.jobs GROUP BY 1, 2`,
    );
    expect(states).toEqual([{ status: "Succeeded", attempts: 1, n: 3_000 }]);
  });

  it("stopping while claims are out gives back what they take: no job is left Running", async () => {
    await enqueueMany(
      db,
      Array.from({ length: 5_000 }, (_, n) => noopJob.request({ n })),
    );
    // Each claim's answer comes 200 ms after its rows were taken.
    const { db: counted, claims } = claimCountingDb("stop-test", 6, 200);
    const worker = newWorker({ db: counted, pollIntervalMs: 60_000 });
    worker.register(noopJob, { concurrency: 10, batchSize: 100, handler: async () => undefined });
    await worker.start();
    // Stopped while a claim is out (between two claims the lane runs what it holds, for a moment).
    await until(async () => worker.stats.succeeded >= 300 && claims.inFlight > 0, 30_000);
    await worker.stop();
    await counted.end();
    const states = await db.any<{ status: string; attempts: number; n: number }>(
      sql`SELECT status, attempts, count(*)::int AS n FROM job_reaper.jobs GROUP BY 1, 2 ORDER BY 1`,
    );
    expect(states).toEqual([
      { status: "Pending", attempts: 0, n: 5_000 - worker.stats.succeeded },
      { status: "Succeeded", attempts: 1, n: worker.stats.succeeded },
    ]);
  });

  it("a job deferred for a moment is claimed again when it is due, not at the slow poll", async () => {
    const { id } = await enqueue(db, noopJob, {});
    // The slow poll is a minute away: only the lane's own wake can run the job within the wait below.
    const worker = newWorker({ pollIntervalMs: 60_000 });
    const runs: number[] = [];
    worker.register(noopJob, {
      handler: async () => {
        runs.push(Date.now());
        if (runs.length < 3) throw new DeferJobError("in a moment", 300);
      },
    });
    await worker.start();
    await until(async () => (await row(id)).status === JobStatus.Succeeded, 15_000);
    expect(runs).toHaveLength(3);
    // Each run came no earlier than its deferral asked.
    expect((runs[1] as number) - (runs[0] as number)).toBeGreaterThanOrEqual(290);
    expect((runs[2] as number) - (runs[1] as number)).toBeGreaterThanOrEqual(290);
    expect(await row(id)).toMatchObject({ attempts: 1 });
    await worker.stop();
  });

  it("a deferred job runs later without spending an attempt", async () => {
    const { id } = await enqueue(db, noopJob, {}, { maxAttempts: 1 });
    const worker = newWorker({ pollIntervalMs: 50 });
    let runs = 0;
    worker.register(noopJob, {
      handler: async () => {
        if (++runs < 3) throw new DeferJobError("not now", 0);
      },
    });
    await worker.start();
    await until(async () => (await row(id)).status === JobStatus.Succeeded);
    // Deferred twice, then run: one attempt in all, although only one was allowed.
    expect(await row(id)).toMatchObject({ status: JobStatus.Succeeded, attempts: 1 });
    expect(worker.stats).toMatchObject({ deferred: 2, succeeded: 1 });
    await worker.stop();
  });

  it("wakes on a new job at once (NOTIFY), not on the slow poll", async () => {
    const worker = newWorker({ pollIntervalMs: 60_000 });
    const startedAt: number[] = [];
    worker.register(noopJob, { handler: async () => void startedAt.push(Date.now()) });
    await worker.start();
    await new Promise((r) => setTimeout(r, 100));
    const enqueuedAt = Date.now();
    await enqueue(db, noopJob, {});
    await until(async () => startedAt.length === 1, 15_000);
    // The slow poll is a minute away: anything well under it was the notification, however busy the
    // machine (the latency itself is a benchmark figure, not a test's).
    expect((startedAt[0] as number) - enqueuedAt).toBeLessThan(10_000);
    await worker.stop();
  });

  it("on stop, releases claimed jobs it has not started, without counting the attempt", async () => {
    await enqueueMany(
      db,
      Array.from({ length: 6 }, () => noopJob.request({})),
    );
    const worker = newWorker({ batchSize: 6 });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    worker.register(noopJob, { concurrency: 1, handler: () => gate });
    await worker.start();
    await until(
      async () =>
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status = 'Running'`,
          )
        ).n === 6,
    );
    const stopping = worker.stop();
    setTimeout(release, 100);
    await stopping;
    const states = await db.any<{ status: string; attempts: number; n: number }>(
      sql`SELECT status, attempts, count(*)::int AS n FROM job_reaper.jobs GROUP BY 1, 2 ORDER BY 1`,
    );
    expect(states).toEqual([
      { status: "Pending", attempts: 0, n: 5 },
      { status: "Succeeded", attempts: 1, n: 1 },
    ]);
  });
});

describe("fairness between workspaces", () => {
  const fairJob = defineJob<{ n: number }>("test.fair", { maxAttempts: 3 });

  it("claims and starts a workspace's jobs next, however many of another's are queued before them", async () => {
    await enqueueMany(
      db,
      Array.from({ length: 2_000 }, (_, n) => fairJob.request({ n }, { workspaceKey: "flood" })),
    );
    await enqueueMany(
      db,
      Array.from({ length: 3 }, (_, n) => fairJob.request({ n }, { workspaceKey: "small" })),
    );
    const started: string[] = [];
    const worker = newWorker({ batchSize: 20 });
    onTestFinished(() => worker.stop());
    worker.register(fairJob, {
      concurrency: 2,
      handler: async (job) => {
        started.push(job.workspaceKey ?? "");
        await new Promise((r) => setTimeout(r, 1));
      },
    });
    await worker.start();
    await until(async () => started.filter((w) => w === "small").length === 3, 10_000);
    // In claim order (oldest first) they would be the 2,001st to 2,003rd; round the workspaces, the
    // first claim takes them beside the flood's first, and the lane starts them in turn with it.
    expect(started.lastIndexOf("small")).toBeLessThan(10);
  });

  it("runs at most JobWorkspaceConcurrency jobs of one workspace at once, the others' beside them", async () => {
    await enqueueMany(db, [
      ...Array.from({ length: 8 }, (_, n) => fairJob.request({ n }, { workspaceKey: "a" })),
      ...Array.from({ length: 8 }, (_, n) => fairJob.request({ n }, { workspaceKey: "b" })),
    ]);
    const running = new Map<string, number>();
    let most = 0;
    let together = 0;
    let done = 0;
    // No poll to fall back on: a workspace's jobs left out while it was at its limit are claimed once
    // its queued ones start, not at the next poll.
    const worker = newWorker({ workspaceConcurrency: 2, pollIntervalMs: 3_600_000 });
    onTestFinished(() => worker.stop());
    worker.register(fairJob, {
      concurrency: 6,
      handler: async (job) => {
        const key = job.workspaceKey ?? "";
        running.set(key, (running.get(key) ?? 0) + 1);
        most = Math.max(most, ...running.values());
        together = Math.max(
          together,
          [...running.values()].reduce((a, b) => a + b, 0),
        );
        await new Promise((r) => setTimeout(r, 20));
        running.set(key, (running.get(key) ?? 1) - 1);
        done++;
      },
    });
    await worker.start();
    await until(async () => done === 16, 10_000);
    expect(most).toBe(2);
    expect(together).toBe(4);
  });

  it("starts at most JobWorkspaceRatePerSecond jobs of one workspace a second, spread out, and another's at once", async () => {
    const rate = 20;
    await enqueueMany(
      db,
      Array.from({ length: 60 }, (_, n) => fairJob.request({ n }, { workspaceKey: "flood" })),
    );
    const starts: Array<{ key: string; at: number }> = [];
    const registry = new Registry();
    const held = async () =>
      (await registry.getSingleMetric("svc_jobs_held")?.get())?.values.find(
        (v) => v.labels.type === fairJob.type,
      )?.value;
    // No poll to fall back on: the pace's own timer starts the held jobs.
    const worker = newWorker({
      workspaceRate: rate,
      pollIntervalMs: 3_600_000,
      metrics: createJobMetrics(registry),
    });
    onTestFinished(() => worker.stop());
    worker.register(fairJob, {
      concurrency: 10,
      handler: async (job) => {
        starts.push({ key: job.workspaceKey ?? "", at: performance.now() });
        await new Promise((r) => setTimeout(r, 1));
      },
    });
    await worker.start();
    await until(async () => starts.length >= 10, 10_000);
    // The flood's claimed jobs that wait for its pace are counted.
    expect(await held()).toBeGreaterThan(0);
    // While the flood is held to its pace, another workspace's jobs are claimed and start at once.
    await enqueueMany(
      db,
      Array.from({ length: 3 }, (_, n) => fairJob.request({ n }, { workspaceKey: "small" })),
    );
    await until(async () => starts.length === 63, 20_000);
    expect(await held()).toBe(0);
    const flood = starts.filter((s) => s.key === "flood").map((s) => s.at);
    // A burst of 100 ms' worth (3 at 20 a second) at most, then one every 50 ms: never more in a window.
    for (const [i, at] of flood.entries()) {
      const inSecond = flood.filter((t) => t >= at && t < at + 1_000).length;
      expect(inSecond, `starts in the second from the ${i + 1}th`).toBeLessThanOrEqual(rate + 3);
    }
    expect((flood.at(-1) ?? 0) - (flood[0] ?? 0)).toBeGreaterThanOrEqual(((60 - 3) * 1_000) / rate - 5);
    // The small workspace's jobs did not wait behind the flood's held ones.
    const lastSmall = starts.findLastIndex((s) => s.key === "small");
    expect(starts.slice(lastSmall + 1).filter((s) => s.key === "flood").length).toBeGreaterThan(10);
  });
});

describe("a worker process that dies or freezes mid-job", () => {
  function spawnWorker(leaseMs: number) {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join("test", "support", "job-worker-process.ts")],
      {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? "", DATABASE_URL: h.db.url, LEASE_MS: String(leaseMs) },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    children.add(child);
    child.once("exit", () => children.delete(child));
    const lines: string[] = [];
    child.stdout?.on("data", (c: Buffer) => lines.push(...c.toString().split("\n").filter(Boolean)));
    return { child, lines };
  }

  it("a killed worker's job is finished by another worker after the lease, exactly once", async () => {
    const { id } = await enqueue(db, noopJob, { sleepMs: 60_000 });
    const { child, lines } = spawnWorker(1_000);
    await until(async () => lines.includes(`started ${id}`), 20_000);
    child.kill("SIGKILL");
    const reaper = await h.startForTest(jobReaperService, { BackendHost__JobReaperIntervalMs: "100" });
    const worker = newWorker({ pollIntervalMs: 100 });
    const ran: string[] = [];
    worker.register(noopJob, { handler: async (job) => void ran.push(job.id) });
    await worker.start();
    await until(async () => (await row(id)).status === JobStatus.Succeeded, 15_000);
    expect(ran).toEqual([id]);
    expect(await row(id)).toMatchObject({ status: JobStatus.Succeeded, attempts: 2 });
    await worker.stop();
    await reaper.stop();
  }, 40_000);

  it("a killed worker's claim under the five-minute lease is released within seconds: its heartbeat stopped", async () => {
    const { id } = await enqueue(db, noopJob, { sleepMs: 60_000 });
    const { child, lines } = spawnWorker(300_000);
    await until(async () => lines.includes(`started ${id}`), 20_000);
    expect(await row(id)).toMatchObject({ status: JobStatus.Running });
    child.kill("SIGKILL");
    const killedAt = Date.now();
    const reaper = await h.startForTest(jobReaperService, { BackendHost__JobReaperIntervalMs: "500" });
    const worker = newWorker({ pollIntervalMs: 100 });
    worker.register(noopJob, { handler: async () => undefined });
    await worker.start();
    // Ten seconds without a heartbeat, then the next sweep: well inside the lease's five minutes.
    await until(async () => (await row(id)).status === JobStatus.Succeeded, 30_000);
    expect(Date.now() - killedAt).toBeLessThan(30_000);
    expect(await row(id)).toMatchObject({ status: JobStatus.Succeeded, attempts: 2 });
    await worker.stop();
    await reaper.stop();
  }, 60_000);

  it("a frozen worker's late write-back is rejected by the fencing token", async () => {
    const { id } = await enqueue(db, noopJob, { sleepMs: 1_500 });
    const { child, lines } = spawnWorker(800);
    await until(async () => lines.includes(`started ${id}`), 20_000);
    child.kill("SIGSTOP");
    // While it is frozen its lease lapses; the reaper frees the job and another worker completes it.
    const reaper = await h.startForTest(jobReaperService, { BackendHost__JobReaperIntervalMs: "100" });
    const worker = newWorker({ pollIntervalMs: 100 });
    worker.register(noopJob, { handler: async () => undefined });
    await worker.start();
    await until(async () => (await row(id)).status === JobStatus.Succeeded, 15_000);
    const completedAt = (await row(id)).completed_at;
    await worker.stop();
    await reaper.stop();
    child.kill("SIGCONT");
    // The thawed worker finishes its handler and tries to complete with its old token.
    await until(
      async () => lines.some((l) => l.startsWith("stats") && JSON.parse(l.slice(6)).stale === 1),
      15_000,
    );
    expect(await row(id)).toMatchObject({
      status: JobStatus.Succeeded,
      attempts: 2,
      completed_at: completedAt,
    });
    child.kill("SIGKILL");
  }, 40_000);
});

describe("the jobs list (job-reaper.jobs.list)", () => {
  const platform: Principal = {
    subject: "op",
    scope: "platform",
    workspaceKey: null,
    permissions: ["job.read"],
    roles: [],
  };
  const inA: Principal = {
    subject: "a",
    scope: "workspace",
    workspaceKey: "a",
    permissions: ["job.read"],
    roles: [],
  };
  const noScope: Principal = {
    subject: "x",
    scope: null,
    workspaceKey: null,
    permissions: ["job.read"],
    roles: [],
  };

  it("pages through more than 1,000 jobs in numeric id order, each exactly once", async () => {
    await enqueueMany(
      db,
      Array.from({ length: 1_050 }, (_, n) => noopJob.request({ n })),
    );
    const { jobTable, listJobsRoute } = await import("../services/job-reaper/src/jobs-list.js");
    const deps = { jobs: jobTable(db) };
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const query = { limit: 100, ...(cursor ? { cursor } : {}) };
      const page = (await listJobsRoute(deps, { principal: platform, params: {}, query, body: null })).body;
      seen.push(...(page?.items ?? []).map((j) => j.id));
      cursor = page?.nextCursor ?? undefined;
    } while (cursor !== undefined);
    expect(seen).toHaveLength(1_050);
    expect(new Set(seen).size).toBe(1_050);
    const numeric = seen.map(BigInt);
    expect(numeric.every((id, i) => i === 0 || id < (numeric[i - 1] as bigint))).toBe(true);
  });

  it("pages with a stable cursor, filters, applies scope and lists dead letters", async () => {
    const service = await h.startForTest(jobReaperService);
    // Sent as the gateway sends: the principal signed with a published key (published on a connection of
    // the test's own: the service's user may not write the gateway's keys).
    const own = await connect(h.natsOptions());
    onTestFinished(() => own.close());
    const prefix = h.env.SVC_SUBJECT_PREFIX as string;
    const signer = new GatewayPrincipalSigner(own, prefix, 1);
    await signer.publish();
    const bus = new Bus({
      nc: own,
      prefix,
      service: "gateway",
      logger: createLogger("t", "silent"),
      defaultTimeoutMs: 5_000,
      principalSigner: signer,
    });
    const list = async (principal: Principal, query: QueryOf<(typeof jobRoutes)["jobs.list"]>) => {
      const reply = await requestRoute(bus, jobRoutes["jobs.list"], {
        principal,
        params: {},
        query,
        body: null,
      });
      if (reply.body === undefined) throw new Error(`no body (status ${reply.status})`);
      return reply.body;
    };
    await enqueueMany(db, [
      ...Array.from({ length: 5 }, () => noopJob.request({}, { workspaceKey: "a" })),
      ...Array.from({ length: 3 }, () => noopJob.request({}, { workspaceKey: "b" })),
    ]);
    const { id: deadId } = await enqueue(db, noopJob, {}, { workspaceKey: "a", maxAttempts: 1 });
    const [c] = await claimJobs(db, "noop", 100, 60_000, "t").then((all) =>
      all.filter((j) => j.id === deadId),
    );
    await failJobs(db, [{ id: deadId, token: c?.token as string, error: "gave up", retryAt: new Date() }]);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await list(platform, { limit: 4, ...(cursor ? { cursor } : {}) });
      expect(page.items.length).toBeLessThanOrEqual(4);
      seen.push(...page.items.map((j) => j.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toHaveLength(9);
    expect(new Set(seen).size).toBe(9);
    expect([...seen].sort((x, y) => Number(y) - Number(x))).toEqual(seen);

    const dead = await list(platform, { status: "Failed" });
    expect(dead.items).toEqual([
      expect.objectContaining({ id: deadId, status: "Failed", lastError: "gave up", workspaceKey: "a" }),
    ]);

    const mine = await list(inA, {});
    expect(mine.items).toHaveLength(6);
    expect(mine.items.every((j) => j.workspaceKey === "a")).toBe(true);
    const onlyB = await list(platform, { workspaceKey: "b" });
    expect(onlyB.items).toHaveLength(3);

    await expect(list(inA, { workspaceKey: "b" })).rejects.toMatchObject({ status: 404 });
    await expect(list(noScope, {})).rejects.toMatchObject({ status: 403 });
    await expect(list(platform, { limit: 101 })).rejects.toMatchObject({
      status: 400,
      extensions: { errors: [expect.objectContaining({ field: "/query/limit" })] },
    });
    await expect(list(platform, { cursor: "bm9wZQ" })).rejects.toMatchObject({ status: 400 });
    await service.stop();
  });
});

describe("GET /api/jobs through the gateway", () => {
  it("lists by the caller's reach and rejects an oversized limit with a 400 problem", async () => {
    const { gatewayService } = await import("@svc/service-gateway");
    const { rbacService } = await import("@svc/service-rbac");
    const { mintToken } = await import("./support/tokens.js");
    const { http } = await import("./support/http.js");
    await h.start(rbacService);
    await h.start(jobReaperService);
    const base = (await h.start(gatewayService)).hooks.httpAddress as string;
    await enqueueMany(db, [
      noopJob.request({}, { workspaceKey: "a" }),
      noopJob.request({}, { workspaceKey: "b" }),
    ]);
    const get = async (path: string, claims: Parameters<typeof mintToken>[0]) =>
      http(`${base}${path}`, { headers: { authorization: `Bearer ${await mintToken(claims)}` } });
    const operator = await get("/api/jobs", { scope: "platform", permissions: ["job.read"] });
    expect(operator.json<{ items: unknown[] }>().items).toHaveLength(2);
    const inA = await get("/api/jobs", { scope: "workspace", workspaceKey: "a", permissions: ["job.read"] });
    expect(inA.json<{ items: Array<{ workspaceKey: string }> }>().items.map((j) => j.workspaceKey)).toEqual([
      "a",
    ]);
    expect(
      (
        await get("/api/jobs?workspaceKey=b", {
          scope: "workspace",
          workspaceKey: "a",
          permissions: ["job.read"],
        })
      ).status,
    ).toBe(404);
    const tooMany = await get("/api/jobs?limit=500", { scope: "platform", permissions: ["job.read"] });
    expect(tooMany.status).toBe(400);
    expect(tooMany.json()).toMatchObject({
      errors: [expect.objectContaining({ field: expect.stringContaining("limit") })],
    });
    await h.stopAll();
  });
});

describe("POST /api/jobs/{id}/retry through the gateway", () => {
  it("puts a dead letter back in the queue for one more attempt, wakes the workers, and refuses the rest", async () => {
    const { gatewayService } = await import("@svc/service-gateway");
    const { rbacService } = await import("@svc/service-rbac");
    const { mintToken } = await import("./support/tokens.js");
    const { http } = await import("./support/http.js");
    const pg = (await import("pg")).default;
    await h.start(rbacService);
    await h.start(jobReaperService);
    const base = (await h.start(gatewayService)).hooks.httpAddress as string;
    const [job] = await enqueueMany(db, [noopJob.request({}, { workspaceKey: "a" })]);
    const id = String(job?.id);
    await db.query(sql`
      UPDATE job_reaper.jobs SET status = 'Failed', attempts = 3, max_attempts = 3, completed_at = now(),
        last_error = 'the receiver answered 500', announced_at = now()
      WHERE id = ${id}::bigint`);
    const post = async (jobId: string, claims: Parameters<typeof mintToken>[0], action = "retry") =>
      http(`${base}/api/jobs/${jobId}/${action}`, {
        method: "POST",
        headers: { authorization: `Bearer ${await mintToken(claims)}` },
      });
    const operator = { scope: "platform" as const, permissions: ["job.read", "job.execute"] };
    const listener = new pg.Client({ connectionString: h.db.url });
    await listener.connect();
    const woken: string[] = [];
    listener.on("notification", (n) => woken.push(n.payload ?? ""));
    await listener.query("LISTEN svc_jobs");
    try {
      // Another workspace's session finds no such job; a session without the key is refused.
      expect(
        (await post(id, { scope: "workspace", workspaceKey: "b", permissions: ["job.execute"] })).status,
      ).toBe(404);
      expect((await post(id, { scope: "platform", permissions: ["job.read"] })).status).toBe(403);
      const retried = await post(id, operator);
      expect(retried.status, retried.text).toBe(200);
      expect(retried.json()).toMatchObject({ id, status: "Pending", attempts: 3, maxAttempts: 4 });
      expect(await row(id)).toMatchObject({ status: "Pending", attempts: 3 });
      const stored = await db.one<{ announced_at: Date | null; due: boolean }>(sql`
        SELECT announced_at, run_at <= now() AS due FROM job_reaper.jobs WHERE id = ${id}::bigint`);
      expect(stored).toEqual({ announced_at: null, due: true });
      await until(async () => woken.includes("noop"), 5_000);
      // Not Failed any more: 409; no such job: 404; not a job id: 400.
      expect((await post(id, operator)).status).toBe(409);
      expect((await post("999999", operator)).status).toBe(404);
      expect((await post("abc", operator)).status).toBe(400);
      // Pending again: made due now, then cancelled by its operator (named in its last error); once
      // ended, neither applies (409).
      const runNow = await post(id, operator, "run-now");
      expect(runNow.status, runNow.text).toBe(200);
      expect(runNow.json()).toMatchObject({ id, status: "Pending" });
      const cancelled = await post(id, { ...operator, sub: "op-7" }, "cancel");
      expect(cancelled.status, cancelled.text).toBe(200);
      expect(cancelled.json()).toMatchObject({ id, status: "Failed", lastError: "Cancelled by op-7." });
      expect((await post(id, operator, "run-now")).status).toBe(409);
      expect((await post(id, operator, "cancel")).status).toBe(409);
      expect((await post(id, { scope: "platform", permissions: ["job.read"] }, "cancel")).status).toBe(403);
    } finally {
      await listener.end();
      await h.stopAll();
    }
  });
});

describe("an operator's actions on waiting jobs (the job library's own)", () => {
  it("runs a waiting job now and wakes its workers; cancels one into a dead letter; refuses the rest", async () => {
    const later = new Date(Date.now() + 3_600_000);
    const later2 = defineJob<Record<string, never>>("later.two", { maxAttempts: 3 });
    const [a, b, c] = await enqueueMany(db, [
      noopJob.request({}, { workspaceKey: "a", runAt: later }),
      noopJob.request({}, { workspaceKey: "b", runAt: later }),
      later2.request({}, { workspaceKey: "a", runAt: later }),
    ]);
    const [ia, ib, ic] = [a, b, c].map((j) => String(j?.id));
    const listener = new pg.Client({ connectionString: h.db.url });
    await listener.connect();
    onTestFinished(() => listener.end());
    const woken: string[] = [];
    listener.on("notification", (n) => woken.push(n.payload ?? ""));
    await listener.query("LISTEN svc_jobs");

    // Another workspace's job is out of reach; the caller's own is due now, its workers told.
    expect(await runJobNow(db, String(ia), "b")).toEqual({ missing: true });
    const ran = await runJobNow(db, String(ia), "a");
    expect(ran).toMatchObject({ job: { id: ia, status: "Pending", attempts: 0 } });
    expect((await row(String(ia))).delay_ms).toBeLessThanOrEqual(0);
    await until(async () => woken.includes("noop"), 5_000);

    // Cancelled: a dead letter whose last error says why, not announced, and retried like any other.
    const cancelled = await cancelJob(db, String(ib), undefined, "Cancelled by ada.");
    expect(cancelled).toMatchObject({ job: { id: ib, status: "Failed", lastError: "Cancelled by ada." } });
    const stored = await db.one<{ announced: boolean; completed: boolean }>(sql`
      SELECT announced_at IS NOT NULL AS announced, completed_at IS NOT NULL AS completed
      FROM job_reaper.jobs WHERE id = ${ib}::bigint`);
    expect(stored).toEqual({ announced: true, completed: true });
    expect(await cancelJob(db, String(ib), undefined, "again")).toEqual({ status: "Failed" });
    expect(await runJobNow(db, String(ib), undefined)).toEqual({ status: "Failed" });
    expect(await retryDeadLetter(db, String(ib), undefined)).toMatchObject({ job: { status: "Pending" } });

    // Many at once, by selection: only the named type's waiting jobs move.
    await db.query(
      sql`UPDATE job_reaper.jobs SET run_at = ${later} WHERE id IN (${ia}::bigint, ${ic}::bigint)`,
    );
    expect(await runPendingJobsNow(db, { type: "later.two" })).toEqual([ic]);
    expect((await row(String(ia))).delay_ms).toBeGreaterThan(3_000_000);
    await until(async () => woken.includes("later.two"), 5_000);
  });
});

describe("listJobs filters", () => {
  it("returns exactly the jobs each filter and combination names, newest first, past a cursor", async () => {
    // Types of their own (no worker handles them).
    const alpha = defineJob<Record<string, never>>("alpha", { maxAttempts: 3 });
    const beta = defineJob<Record<string, never>>("beta", { maxAttempts: 3 });
    await enqueueMany(db, [
      alpha.request({}, { workspaceKey: "a" }),
      beta.request({}, { workspaceKey: "a" }),
      alpha.request({}, { workspaceKey: "b" }),
      alpha.request({}, { workspaceKey: null }),
    ]);
    await db.query(
      sql`UPDATE job_reaper.jobs SET status = 'Failed' WHERE type = 'alpha' AND workspace_key = 'b'`,
    );
    const all = await listJobs(db, { limit: 50 });
    const pick = (f: (j: (typeof all)[number]) => boolean) => all.filter(f).map((j) => j.id);
    const ids = async (filter: Omit<ListFilter, "limit">) =>
      (await listJobs(db, { ...filter, limit: 50 })).map((j) => j.id);
    expect(all.map((j) => Number(j.id))).toEqual([...all.map((j) => Number(j.id))].sort((x, y) => y - x));
    expect(await ids({ type: "alpha" })).toEqual(pick((j) => j.type === "alpha"));
    expect(await ids({ workspaceKey: "a" })).toEqual(pick((j) => j.workspaceKey === "a"));
    expect(await ids({ status: "Failed" })).toEqual(pick((j) => j.status === "Failed"));
    expect(await ids({ status: "Pending", type: "alpha" })).toEqual(
      pick((j) => j.status === "Pending" && j.type === "alpha"),
    );
    expect(await ids({ type: "alpha", workspaceKey: "a", status: "Pending" })).toEqual(
      pick((j) => j.type === "alpha" && j.workspaceKey === "a" && j.status === "Pending"),
    );
    const newest = all[0]?.id as string;
    expect(await ids({ beforeId: newest })).toEqual(all.slice(1).map((j) => j.id));
  });
});

describe("retention of ended jobs", () => {
  /** A job of its own type as it would stand after `ageDays` (made then) and `endedDaysAgo` (ended then). */
  async function jobAged(
    status: JobStatus,
    ageDays: number,
    endedDaysAgo: number | null,
    announced = true,
  ): Promise<string> {
    const r = await db.one<{ id: string }>(sql`
      INSERT INTO job_reaper.jobs (type, status, attempts, max_attempts, created_at, completed_at, announced_at)
      VALUES ('aged', ${status}, 1, 3, now() - make_interval(days => ${ageDays}),
              ${endedDaysAgo === null ? null : sql`now() - make_interval(days => ${endedDaysAgo})`},
              ${announced ? sql`now()` : null})
      RETURNING id::text`);
    return r.id;
  }
  const left = async () =>
    (await db.any<{ id: string }>(sql`SELECT j.id::text FROM job_reaper.jobs j ORDER BY j.id`)).map(
      (r) => r.id,
    );

  it("deletes the jobs that ended before the cutoff, in batches, and keeps waiting, running and unannounced ones", async () => {
    const gone: string[] = [];
    const kept: string[] = [];
    for (let i = 0; i < 4; i++) gone.push(await jobAged(JobStatus.Succeeded, 40, 39));
    kept.push(await jobAged(JobStatus.Pending, 40, null)); // old, still waiting
    gone.push(await jobAged(JobStatus.Failed, 40, 38)); // a dead letter, announced
    kept.push(await jobAged(JobStatus.Failed, 40, 38, false)); // not announced yet
    kept.push(await jobAged(JobStatus.Running, 40, null));
    for (let i = 0; i < 3; i++) gone.push(await jobAged(JobStatus.Succeeded, 35, 32));
    kept.push(await jobAged(JobStatus.Succeeded, 40, 10)); // made long ago, ended recently
    kept.push(await jobAged(JobStatus.Succeeded, 1, 1));
    kept.push(await jobAged(JobStatus.Failed, 0, 0));

    const cutoff = new Date(Date.now() - 30 * 86_400_000);
    // Its service stopping: the first batch of three, and the rest left for the next sweep.
    expect(await deleteEndedJobs(db, cutoff, { batch: 3, signal: AbortSignal.abort() })).toBe(3);
    // Batches of three: the walk goes past batches that delete nothing and stops at recent jobs.
    expect(await deleteEndedJobs(db, cutoff, { batch: 3 })).toBe(gone.length - 3);
    expect(await left()).toEqual(kept);
    expect(await deleteEndedJobs(db, cutoff, { batch: 3 })).toBe(0);
  });

  it("the job reaper deletes at start what ended past BackendHost:JobRetentionDays", async () => {
    const old = await jobAged(JobStatus.Succeeded, 12, 11);
    const young = await jobAged(JobStatus.Succeeded, 9, 9);
    const waiting = await jobAged(JobStatus.Pending, 12, null);
    const reaper = await h.startForTest(jobReaperService, { BackendHost__JobRetentionDays: "10" });
    await until(async () => !(await left()).includes(old));
    expect(await left()).toEqual([young, waiting]);
    await reaper.stop();
  });
});
