/** Runs only the job-engine part of `make bench` (see jobs.ts); used by main.ts too. */
import pg from "pg";

import { migrateAll } from "../../scripts/lib/stack.js";
import { benchGraphile, benchOurs, type JobsBenchResult } from "./jobs.js";

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** The median of each figure over the rounds (one engine's runs alternate with the others'). */
function medianOf(runs: JobsBenchResult[]): JobsBenchResult {
  return {
    name: (runs[0] as JobsBenchResult).name,
    enqueuePerSecond: median(runs.map((r) => r.enqueuePerSecond)),
    completedPerSecond: median(runs.map((r) => r.completedPerSecond)),
    latencyP50Ms: median(runs.map((r) => r.latencyP50Ms)),
    latencyP99Ms: median(runs.map((r) => r.latencyP99Ms)),
  };
}

/**
 * Runs the engines in alternation for `rounds` rounds (graphile-worker's default configuration, much the
 * slowest, once) and reports each engine's median, so that a noisy moment does not decide the ratio.
 */
export async function runJobsBench(
  serverUrl: URL,
  stamp: string,
  jobs = 20_000,
  concurrency = 10,
  rounds = 3,
) {
  const dbName = `svc_bench_jobs_${stamp}`;
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  await migrateAll(url.toString());
  const ours: JobsBenchResult[] = [];
  const batched: JobsBenchResult[] = [];
  const byDefault: JobsBenchResult[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      ours.push(await benchOurs(url.toString(), jobs, concurrency));
      batched.push(await benchGraphile(url.toString(), jobs, concurrency, true, `gw_batched_${stamp}`));
      process.stderr.write(
        `[bench] jobs round ${round + 1}: svc ${ours.at(-1)?.completedPerSecond.toFixed(0)}/s, graphile batched ${batched.at(-1)?.completedPerSecond.toFixed(0)}/s\n`,
      );
    }
    byDefault.push(await benchGraphile(url.toString(), jobs, concurrency, false, `gw_default_${stamp}`));
  } finally {
    const admin = new pg.Client({ connectionString: serverUrl.toString() });
    await admin.connect();
    // graphile-worker closes some of its connections after stop() resolves; a forced drop would terminate
    // them under a pool that no longer listens for errors (an unhandled 'error' ends the process). Wait
    // for them to go, and force only what is left after 5 s.
    let dropped = false;
    for (let i = 0; i < 25 && !dropped; i++) {
      dropped = await admin.query(`DROP DATABASE IF EXISTS "${dbName}"`).then(
        () => true,
        () => new Promise<boolean>((r) => setTimeout(() => r(false), 200)),
      );
    }
    if (!dropped)
      await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
  return [medianOf(ours), medianOf(byDefault), medianOf(batched)];
}

export function printJobsResults(results: JobsBenchResult[], jobs: number, concurrency: number) {
  const pad = (s: string, n: number) => s.padEnd(n);
  const f = (n: number) => (n < 100 ? n.toFixed(2) : n.toFixed(0));
  console.log(`\nJob engine: ${jobs} trivial jobs, concurrency ${concurrency}, same PostgreSQL (medians)`);
  console.log(
    `${pad("engine", 40)}${pad("enqueue/s", 12)}${pad("complete/s", 12)}${pad("start p50 ms", 14)}start p99 ms`,
  );
  for (const r of results) {
    console.log(
      `${pad(r.name, 40)}${pad(f(r.enqueuePerSecond), 12)}${pad(f(r.completedPerSecond), 12)}${pad(f(r.latencyP50Ms), 14)}${f(r.latencyP99Ms)}`,
    );
  }
  const [ours, , batched] = results;
  if (ours && batched) {
    const ratio = ours.completedPerSecond / batched.completedPerSecond;
    console.log(
      `  svc / graphile batched (completed/s): ${ratio.toFixed(3)}x   (target >= 1.50x: ${ratio >= 1.5 ? "met" : "NOT met"})`,
    );
    console.log(
      `  svc enqueue-to-start p50 ${f(ours.latencyP50Ms)} ms (target < 2 ms: ${ours.latencyP50Ms < 2 ? "met" : "NOT met"})`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
  const jobs = Number(process.env.BENCH_JOBS ?? 20_000);
  const results = await runJobsBench(serverUrl, Date.now().toString(36), jobs, 10);
  printJobsResults(results, jobs, 10);
}
