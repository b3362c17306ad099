/**
 * The job engine's figures next to graphile-worker 0.17 on the same PostgreSQL, same concurrency:
 *   - enqueue rate (20,000 trivial jobs, batched inserts);
 *   - completion rate (start the worker on the 20,000 queued jobs; stop the clock when the database shows
 *     all of them completed);
 *   - enqueue-to-start latency with an idle queue (jobs added one by one, p50/p99).
 * graphile-worker runs twice: as configured by default, and batched (localQueue.size 500, batched
 * completions). Ours checks the fencing token on every write-back.
 */
import { createDb, type Db, raw as rawSql, sql } from "@svc/db";
import { enqueue, enqueueMany, JobWorker, noopJob } from "@svc/jobs";
import { createLogger } from "@svc/observability";
import { Logger, makeWorkerUtils, run, type Runner } from "graphile-worker";

import { percentile } from "./stats.js";

const silent = new Logger(() => () => undefined);

export interface JobsBenchResult {
  readonly name: string;
  readonly enqueuePerSecond: number;
  readonly completedPerSecond: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
}

const log = createLogger("bench-jobs", "silent");

async function waitUntil(check: () => Promise<boolean>, intervalMs: number, timeoutMs = 300_000) {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("benchmark condition not met in time");
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

async function measureLatency(samples: number, enqueueOne: () => Promise<void>, starts: number[]) {
  const latencies: number[] = [];
  for (let i = 0; i < samples; i++) {
    const before = starts.length;
    const t0 = performance.now();
    await enqueueOne();
    await waitUntil(async () => starts.length > before, 1, 10_000);
    latencies.push((starts.at(-1) as number) - t0);
    await new Promise((r) => setTimeout(r, 5));
  }
  return latencies.sort((a, b) => a - b);
}

export async function benchOurs(
  databaseUrl: string,
  jobs: number,
  concurrency: number,
  /** Keep the jobs still queued (a backlog the growth benchmark wrote): only finished ones are removed. */
  keepQueued = false,
): Promise<JobsBenchResult> {
  const db: Db = createDb({ databaseUrl, maximumPoolSize: 10, applicationName: "bench-jobs" });
  try {
    await db.query(
      keepQueued ? sql`DELETE FROM job_reaper.jobs WHERE status <> 'Pending'` : sql`TRUNCATE job_reaper.jobs`,
    );
    const t0 = performance.now();
    const chunk = 1_000;
    for (let i = 0; i < jobs; i += chunk) {
      await enqueueMany(
        db,
        Array.from({ length: Math.min(chunk, jobs - i) }, (_, n) => noopJob.request({ n: i + n })),
      );
    }
    const enqueueSeconds = (performance.now() - t0) / 1000;

    const starts: number[] = [];
    const worker = new JobWorker({
      db,
      databaseUrl,
      workerId: "bench",
      log,
      batchSize: 500,
      pollIntervalMs: 1_000,
    });
    worker.register(noopJob, { concurrency, handler: async () => void starts.push(performance.now()) });
    const t1 = performance.now();
    await worker.start();
    await waitUntil(async () => worker.stats.succeeded >= jobs, 2);
    const runSeconds = (performance.now() - t1) / 1000;
    const remaining = await db.one<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM job_reaper.jobs
          WHERE type = ${noopJob.type} AND run_at <= now() AND status <> 'Succeeded'`,
    );
    if (remaining.n !== 0) throw new Error(`${remaining.n} jobs not completed`);

    starts.length = 0;
    const latencies = await measureLatency(200, async () => void (await enqueue(db, noopJob, {})), starts);
    await worker.stop();
    return {
      name: "svc jobs (fencing tokens)",
      enqueuePerSecond: jobs / enqueueSeconds,
      completedPerSecond: jobs / runSeconds,
      latencyP50Ms: percentile(latencies, 50),
      latencyP99Ms: percentile(latencies, 99),
    };
  } finally {
    await db.end();
  }
}

export async function benchGraphile(
  databaseUrl: string,
  jobs: number,
  concurrency: number,
  batched: boolean,
  schema: string,
): Promise<JobsBenchResult> {
  const db: Db = createDb({ databaseUrl, maximumPoolSize: 2, applicationName: "bench-graphile" });
  const preset = batched
    ? { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } }
    : {};
  const utils = await makeWorkerUtils({ connectionString: databaseUrl, schema, logger: silent });
  let runner: Runner | undefined;
  try {
    await utils.migrate();
    const t0 = performance.now();
    const chunk = 1_000;
    for (let i = 0; i < jobs; i += chunk) {
      await utils.addJobs(
        Array.from({ length: Math.min(chunk, jobs - i) }, (_, n) => ({
          identifier: "noop",
          payload: { n: i + n },
        })),
      );
    }
    const enqueueSeconds = (performance.now() - t0) / 1000;
    const count = async () =>
      (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM ${rawTable(schema)}`)).n;

    const starts: number[] = [];
    const t1 = performance.now();
    runner = await run({
      connectionString: databaseUrl,
      schema,
      concurrency,
      noHandleSignals: true,
      pollInterval: 1_000,
      logger: silent,
      taskList: { noop: async () => void starts.push(performance.now()) },
      preset,
    });
    // Completed graphile jobs are deleted: done when the table is empty.
    await waitUntil(async () => (await count()) === 0, 5);
    const runSeconds = (performance.now() - t1) / 1000;

    starts.length = 0;
    const latencies = await measureLatency(200, async () => void (await utils.addJob("noop", {})), starts);
    return {
      name: batched ? "graphile-worker 0.17 (localQueue 500)" : "graphile-worker 0.17 (default)",
      enqueuePerSecond: jobs / enqueueSeconds,
      completedPerSecond: jobs / runSeconds,
      latencyP50Ms: percentile(latencies, 50),
      latencyP99Ms: percentile(latencies, 99),
    };
  } finally {
    await runner?.stop().catch(() => undefined);
    await utils.release();
    await db.end();
  }
}

function rawTable(schema: string) {
  if (!/^[a-z0-9_]+$/.test(schema)) throw new Error("bad schema name");
  return rawSql(`"${schema}"._private_jobs`);
}
