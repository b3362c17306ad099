/**
 * Fairness between tenants in the job engine: four small workspaces enqueue a job each every 20 ms
 * (200 jobs/s together), first alone, then while a fifth workspace floods the queue with nine times as
 * many (90 % of the jobs) at once: a backlog the workers need seconds to drain; then the flood again with
 * JobWorkspaceConcurrency at half the type's concurrency. Jobs take 2 ms each (an I/O wait), ten at a
 * time. Reported: the small workspaces' enqueue-to-start p50/p95 in each phase, and the ratio to alone
 * (target: within 2x). The same PostgreSQL, a database of its own.
 */
import { createDb, type Db, sql } from "@svc/db";
import { defineJob, enqueue, enqueueMany, JobWorker } from "@svc/jobs";
import { createLogger } from "@svc/observability";

import { dropDatabase, migrateAll } from "../../scripts/lib/stack.js";
import { againstAlone, percentile, sorted } from "./stats.js";

const fairJob = defineJob<{ id: number }>("bench.fair", { maxAttempts: 3 });
const SMALL = ["small-1", "small-2", "small-3", "small-4"];
/** The type's concurrency, and the per-workspace limit of the third phase. */
const CONCURRENCY = 10;
const CAP = 5;

export interface FairnessPhase {
  readonly smallJobs: number;
  readonly floodJobs: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  /** The flood's own enqueue-to-start p95 (none without one). */
  readonly floodP95Ms: number;
}

export interface FairnessResult {
  readonly alone: FairnessPhase;
  /** Workspaces taking turns, no per-workspace limit. */
  readonly flooded: FairnessPhase;
  /** The same with JobWorkspaceConcurrency at half the type's concurrency. */
  readonly capped: FairnessPhase;
  readonly cap: number;
  readonly seconds: number;
}

async function phase(
  db: Db,
  /** The small workspaces' own pool (other services enqueue, not the worker's process). */
  producers: Db,
  databaseUrl: string,
  seconds: number,
  flood: boolean,
  /** JobWorkspaceConcurrency (0: none). */
  cap: number,
): Promise<FairnessPhase> {
  await db.query(sql`TRUNCATE job_reaper.jobs`);
  const enqueuedAt = new Map<number, { at: number; small: boolean }>();
  const small: number[] = [];
  const flooded: number[] = [];
  // The flood is in the queue before the worker starts: a backlog the small workspaces' jobs arrive behind.
  const ticks = Math.floor((seconds * 1000) / 20);
  const floodJobs = flood ? ticks * SMALL.length * 9 : 0;
  let next = 0;
  for (let i = 0; i < floodJobs; i += 1_000) {
    const batch = Array.from({ length: Math.min(1_000, floodJobs - i) }, () => next++);
    await enqueueMany(
      db,
      batch.map((id) => fairJob.request({ id }, { workspaceKey: "flood" })),
    );
  }
  const worker = new JobWorker({
    db,
    databaseUrl,
    workerId: `bench-fair-${flood ? "f" : "a"}${cap}`,
    log: createLogger("bench-fairness", "silent"),
    batchSize: 100,
    pollIntervalMs: 1_000,
    workspaceConcurrency: cap,
  });
  worker.register(fairJob, {
    concurrency: CONCURRENCY,
    handler: async (job) => {
      const at = performance.now();
      const e = enqueuedAt.get(job.payload.id);
      if (e !== undefined) (e.small ? small : flooded).push(at - e.at);
      await new Promise((r) => setTimeout(r, 2));
    },
  });
  // The flood's waits count from the worker's start.
  const startedAt = performance.now();
  for (let id = 0; id < floodJobs; id++) enqueuedAt.set(id, { at: startedAt, small: false });
  await worker.start();
  try {
    const start = performance.now();
    for (let tick = 0; tick < ticks; tick++) {
      const wait = start + tick * 20 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await Promise.all(
        SMALL.map(async (workspaceKey) => {
          const id = next++;
          enqueuedAt.set(id, { at: performance.now(), small: true });
          await enqueue(producers, fairJob, { id }, { workspaceKey });
        }),
      );
    }
    const deadline = Date.now() + 120_000;
    while (small.length + flooded.length < next && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const s = sorted(small);
    return {
      smallJobs: s.length,
      floodJobs,
      p50Ms: percentile(s, 50),
      p95Ms: percentile(s, 95),
      floodP95Ms: flooded.length === 0 ? Number.NaN : percentile(sorted(flooded), 95),
    };
  } finally {
    await worker.stop();
  }
}

export async function runFairnessBench(serverUrl: URL, stamp: string, seconds = 5): Promise<FairnessResult> {
  const url = new URL(serverUrl);
  url.pathname = `/svc_bench_fair_${stamp}`;
  await migrateAll(url.toString());
  const db = createDb({
    databaseUrl: url.toString(),
    maximumPoolSize: 10,
    applicationName: "bench-fairness",
  });
  const producers = createDb({
    databaseUrl: url.toString(),
    maximumPoolSize: SMALL.length,
    applicationName: "bench-fairness-producers",
  });
  const t0 = Date.now();
  try {
    const alone = await phase(db, producers, url.toString(), seconds, false, 0);
    const flooded = await phase(db, producers, url.toString(), seconds, true, 0);
    const capped = await phase(db, producers, url.toString(), seconds, true, CAP);
    return { alone, flooded, capped, cap: CAP, seconds: (Date.now() - t0) / 1000 };
  } finally {
    await db.end();
    await producers.end();
    await dropDatabase(serverUrl.toString(), url.pathname.slice(1));
  }
}

export function printFairnessResults(r: FairnessResult): void {
  const f = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));
  const { alone } = r;
  console.log(
    `\nFairness between workspaces (jobs of 2 ms, ${CONCURRENCY} at a time; ${SMALL.length} small workspaces, a job each every 20 ms)`,
  );
  console.log(
    `  small workspaces alone: ${alone.smallJobs} jobs, enqueue-to-start p50 ${f(alone.p50Ms)} ms, p95 ${f(alone.p95Ms)} ms`,
  );
  for (const [label, p] of [
    ["taking turns", r.flooded],
    [`taking turns, JobWorkspaceConcurrency ${r.cap}`, r.capped],
  ] as const) {
    console.log(
      `  beside a flood of ${p.floodJobs} jobs (90 % of all), ${label}: p50 ${f(p.p50Ms)} ms, p95 ${f(p.p95Ms)} ms, ${againstAlone(p.p95Ms, alone.p95Ms)}; the flood's own p95 ${f(p.floodP95Ms)} ms`,
    );
  }
}
