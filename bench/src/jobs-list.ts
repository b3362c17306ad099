/**
 * The growth benchmark of `GET /api/jobs`: the list's query as the job reaper runs
 * it (`listJobs`), against a jobs table of `--rows` rows (default 1,000,000) in a database of its own, for
 * the first page and each filter the route offers. Prints p50 and p95 per filter; the target is p95 < 20 ms
 * at 1,000,000 rows. `make bench-jobs-list` (BENCH_ARGS="--rows 200000" for a quicker look).
 *
 * The rows look like a platform's history: 70 % webhook deliveries, 25 % flow runs, 5 % a plugin's own
 * type; 0.5 % Running, 0.5 % Pending, Failed 2 % of the oldest tenth (an outage long ago) and rarely since,
 * the rest Succeeded; spread over 10,000 workspaces, 10 %
 * platform-wide. Two values are found only among the oldest rows, the hard case for a list that walks
 * back from the newest: a type used only in the first 1 % (`legacy.import`) and a workspace active only
 * in the first 10 % (`ws-old`). Each filter is asked 100 times after 10 to warm.
 */
import { parseArgs } from "node:util";

import { createDb, sql } from "@svc/db";
import { type ListFilter, listJobs } from "@svc/jobs";
import pg from "pg";

import { migrateAll } from "../../scripts/lib/stack.js";
import { percentile } from "./stats.js";

const { values: args } = parseArgs({
  options: { rows: { type: "string", default: "1000000" }, queries: { type: "string", default: "100" } },
});
const rows = Number(args.rows);
const queries = Number(args.queries);
const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const dbName = `svc_bench_jobs_list_${Date.now().toString(36)}`;
const url = new URL(serverUrl);
url.pathname = `/${dbName}`;

await migrateAll(url.toString());
const db = createDb({ databaseUrl: url.toString(), maximumPoolSize: 2, applicationName: "bench-jobs-list" });
try {
  const started = Date.now();
  // One statement per 100,000 rows, so that no single statement runs for minutes.
  for (let from = 1; from <= rows; from += 100_000) {
    const to = Math.min(rows, from + 99_999);
    await db.query(sql`
      INSERT INTO job_reaper.jobs (type, status, workspace_key, payload, attempts, max_attempts, run_at,
                                   created_at, started_at, completed_at, last_error)
      SELECT CASE WHEN i <= ${rows / 100} THEN 'legacy.import'
                  WHEN i % 20 = 0 THEN 'crm.sync' WHEN i % 4 = 1 THEN 'flow.run' ELSE 'webhook.deliver' END,
             CASE WHEN i % 200 = 7 THEN 'Running' WHEN i % 200 = 11 THEN 'Pending'
                  WHEN i % 50 = 3 AND (i <= ${rows / 10} OR i % 1000 = 3) THEN 'Failed' ELSE 'Succeeded' END,
             CASE WHEN i % 10 = 0 THEN NULL WHEN i <= ${rows / 10} AND i % 10 = 5 THEN 'ws-old'
                  ELSE 'ws-' || (i % 10000) END,
             '{}'::jsonb, 1, 5, now(), now(), now(), now(), NULL
      FROM generate_series(${from}::int, ${to}::int) AS i`);
  }
  await db.query(sql`VACUUM ANALYZE job_reaper.jobs`);
  process.stderr.write(`[bench] ${rows} jobs written in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

  const cases: Array<[string, Omit<ListFilter, "limit">]> = [
    ["first page", {}],
    ["?type=webhook.deliver", { type: "webhook.deliver" }],
    ["?type=crm.sync (5 %)", { type: "crm.sync" }],
    ["?type=legacy.import (oldest 1 %)", { type: "legacy.import" }],
    ["?workspaceKey=ws-4242", { workspaceKey: "ws-4242" }],
    ["?workspaceKey=ws-old (oldest 10 %)", { workspaceKey: "ws-old" }],
    ["?status=Running", { status: "Running" }],
    ["?status=Pending", { status: "Pending" }],
    ["?status=Failed", { status: "Failed" }],
    ["?status=Succeeded", { status: "Succeeded" }],
    ["?status=Failed&type=flow.run", { status: "Failed", type: "flow.run" }],
    ["?workspaceKey=ws-4242&status=Failed", { workspaceKey: "ws-4242", status: "Failed" }],
    ["?workspaceKey=ws-4242, 2nd page", { workspaceKey: "ws-4242", beforeId: String(Math.floor(rows / 2)) }],
  ];
  console.log(
    `GET /api/jobs (limit 50) over ${rows} jobs, ${queries} queries each: p50 / p95 (target p95 < 20 ms)`,
  );
  for (const [name, filter] of cases) {
    const times: number[] = [];
    for (let i = 0; i < queries + 10; i++) {
      const t0 = performance.now();
      await listJobs(db, { ...filter, limit: 50 });
      if (i >= 10) times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const p95 = percentile(times, 95);
    console.log(
      `  ${name.padEnd(40)} ${percentile(times, 50).toFixed(2).padStart(8)} ms ${p95.toFixed(2).padStart(8)} ms${p95 < 20 ? "" : "  over target"}`,
    );
  }
} finally {
  await db.end();
  const admin = new pg.Client({ connectionString: serverUrl.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
}
