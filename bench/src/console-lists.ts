/**
 * The admin console's list pages on large tables, through the whole stack (the gateway,
 * NATS, the owning service, PostgreSQL), as the console asks them. A database of its own gets `--rows`
 * jobs (default 1,000,000) and `--rows` webhook deliveries with one attempt each (1,000,000 attempts),
 * spread over ten subscriptions; the built services run in production mode. Each list is asked `--queries`
 * times (100, after 10 to warm) with the console's page size (50) and its p50 and p95 printed against the
 * target (p95 < 300 ms to first rows). Also prints the console's first load (gzip of its script and
 * stylesheet; the budget is 150 KB). `make bench-console` (BENCH_ARGS="--rows 200000" for a quicker look).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";

import pg from "pg";

import {
  DEMO,
  dropRunResources,
  freePort,
  migrateAll,
  repoRoot,
  seedDemo,
  waitFor,
} from "../../scripts/lib/stack.js";
import { productionEnv, SERVICE_NODE_FLAGS } from "./env.js";
import { percentile, sorted } from "./stats.js";

const { values: args } = parseArgs({
  options: { rows: { type: "string", default: "1000000" }, queries: { type: "string", default: "100" } },
});
const rows = Number(args.rows);
const queries = Number(args.queries);
const stamp = Date.now().toString(36);
const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/svc_bench_console_${stamp}`;
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const children: ChildProcess[] = [];

execFileSync(process.execPath, [join(repoRoot, "scripts", "build.mjs")], { cwd: repoRoot, stdio: "ignore" });
const assets = join(repoRoot, "dist", "static", "admin", "assets");
const firstLoad = ["app.js", "app.css"].map((f) => gzipSync(readFileSync(join(assets, f))).length);

await migrateAll(dbUrl.toString());
await seedDemo(dbUrl.toString(), { withAdmin: true });
const prefix = `benchconsole${stamp}`;
const stream = `SVC_EVENTS_BENCHCONSOLE${stamp.toUpperCase()}`;
const env = {
  ...productionEnv({
    databaseUrl: dbUrl.toString(),
    natsUrl,
    prefix,
    stream,
  }),
  GATEWAY_HOST: "127.0.0.1",
  BackendHost__RateLimitApiPerMinute: "1000000000",
};
const db = new pg.Client({ connectionString: dbUrl.toString() });
await db.connect();
try {
  const started = Date.now();
  const { createSecretBox } = await import("../../services/webhook-dispatcher/src/secrets.js");
  const sealed = createSecretBox(env.BackendHost__SecretsEncryptionKey).seal("bench-secret");
  const subscriptions = Array.from(
    { length: 10 },
    (_, i) => `00000000-0000-4000-8000-${String(i + 1).padStart(12, "0")}`,
  );
  for (const id of subscriptions) {
    await db.query(
      `INSERT INTO webhook_dispatcher.subscriptions (id, event_name, target_url, secret_encrypted)
       VALUES ($1, 'user.created', 'https://receiver.example/hook', $2)`,
      [id, sealed],
    );
  }
  // One statement per 100,000 rows. Jobs: 70 % deliveries, 25 % flow runs, 5 % a plugin's; 2 % Failed.
  // Deliveries: ten subscriptions in turn, a day's worth of history per 100,000, 3 % failed, 2 % retrying.
  for (let from = 1; from <= rows; from += 100_000) {
    const to = Math.min(rows, from + 99_999);
    await db.query(
      `INSERT INTO job_reaper.jobs (type, status, workspace_key, payload, attempts, max_attempts, run_at,
                                    created_at, started_at, completed_at, last_error)
       SELECT CASE WHEN i % 20 = 0 THEN 'crm.sync' WHEN i % 4 = 1 THEN 'flow.run' ELSE 'webhook.deliver' END,
              CASE WHEN i % 50 = 3 THEN 'Failed' WHEN i % 200 = 7 THEN 'Pending' ELSE 'Succeeded' END,
              CASE WHEN i % 10 = 0 THEN NULL ELSE 'ws-' || (i % 10000) END,
              '{}'::jsonb, CASE WHEN i % 50 = 3 THEN 5 ELSE 1 END, 5, now(), now(), now(), now(),
              CASE WHEN i % 50 = 3 THEN 'the receiver answered 500' END
       FROM generate_series($1::int, $2::int) AS i`,
      [from, to],
    );
    await db.query(
      `WITH d AS (
         SELECT md5('d' || i)::uuid AS id, i,
                ('00000000-0000-4000-8000-' || lpad(((i % 10) + 1)::text, 12, '0'))::uuid AS sub,
                now() - make_interval(secs => ($2::int - i) * 0.864) AS at
         FROM generate_series($1::int, $2::int) AS i
       ), ins AS (
         INSERT INTO webhook_dispatcher.deliveries (delivery_id, subscription_id, reach_key, workspace_key,
           event_name, event_id, status, attempts, last_status_code, body, created_at, updated_at)
         SELECT id, sub, NULL, 'ws-' || (i % 10000), 'user.created', 'e-' || i,
                CASE WHEN i % 33 = 0 THEN 'failed' WHEN i % 50 = 1 THEN 'retrying' ELSE 'delivered' END, 1,
                CASE WHEN i % 33 = 0 THEN 500 ELSE 200 END, '{"event":"user.created"}', at, at
         FROM d
       )
       INSERT INTO webhook_dispatcher.delivery_attempts (delivery_id, attempt, attempted_at, duration_ms,
         outcome, status_code, response_excerpt, error)
       SELECT id, 1, at, 20 + i % 180, CASE WHEN i % 33 = 0 THEN 'failed' ELSE 'delivered' END,
              CASE WHEN i % 33 = 0 THEN 500 ELSE 200 END, 'ok', NULL
       FROM d`,
      [from, to],
    );
  }
  await db.query("VACUUM ANALYZE job_reaper.jobs");
  await db.query("VACUUM ANALYZE webhook_dispatcher.deliveries");
  await db.query("VACUUM ANALYZE webhook_dispatcher.delivery_attempts");
  log(
    `${rows} jobs and ${rows} deliveries with an attempt each written in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );

  const port = await freePort();
  for (const name of ["rbac", "job-reaper", "webhook-dispatcher", "gateway"]) {
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, join("dist", `${name}.mjs`)], {
      cwd: repoRoot,
      env: { ...process.env, ...env, GATEWAY_PORT: String(port) },
      stdio: ["ignore", "ignore", "inherit"],
    });
    children.push(child);
  }
  const gateway = `http://127.0.0.1:${port}`;
  await waitFor(
    `${gateway}/ready`,
    async () => (await fetch(`${gateway}/ready`).catch(() => undefined))?.ok === true,
    60_000,
  );
  const login = await fetch(`${gateway}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: DEMO.adminUserName, password: DEMO.adminPassword }),
  });
  const { accessToken } = (await login.json()) as { accessToken: string };
  const auth = { authorization: `Bearer ${accessToken}` };
  const sub = subscriptions[3] as string;
  const oldDelivery = (
    await db.query<{ id: string }>(
      `SELECT delivery_id::text AS id FROM webhook_dispatcher.deliveries WHERE subscription_id = $1
       ORDER BY created_at LIMIT 1`,
      [sub],
    )
  ).rows[0]?.id;

  const cases: Array<[string, string]> = [
    ["jobs: first page", "/api/jobs?limit=50"],
    ["jobs: Failed (dead letters)", "/api/jobs?limit=50&status=Failed"],
    ["jobs: ?type=crm.sync", "/api/jobs?limit=50&type=crm.sync"],
    ["deliveries of a subscription: first page", `/api/webhooks/${sub}/deliveries?limit=50`],
    ["deliveries: failed", `/api/webhooks/${sub}/deliveries?limit=50&status=failed`],
    ["a delivery and its attempts (the oldest)", `/api/webhooks/${sub}/deliveries/${oldDelivery}`],
  ];
  const results: Array<{ name: string; p50: number; p95: number; rows: number }> = [];
  for (const [name, path] of cases) {
    const times: number[] = [];
    let count = 0;
    for (let i = 0; i < queries + 10; i++) {
      const t0 = performance.now();
      const response = await fetch(`${gateway}${path}`, { headers: auth });
      const body = (await response.json()) as { items?: unknown[]; history?: unknown[] };
      const ms = performance.now() - t0;
      if (!response.ok) throw new Error(`${path} answered ${response.status}: ${JSON.stringify(body)}`);
      count = body.items?.length ?? body.history?.length ?? 0;
      if (i >= 10) times.push(ms);
    }
    const ascending = sorted(times);
    results.push({ name, p50: percentile(ascending, 50), p95: percentile(ascending, 95), rows: count });
  }

  console.log(
    `\nThe admin console on ${rows.toLocaleString("en")} jobs and ${rows.toLocaleString("en")} delivery attempts`,
  );
  console.log(
    `first load: ${((firstLoad[0]! + firstLoad[1]!) / 1024).toFixed(1)} KB compressed (script ${firstLoad[0]} B, stylesheet ${firstLoad[1]} B; budget 150 KB)`,
  );
  console.log("\n| list (through the gateway, 50 rows a page) | rows | p50 ms | p95 ms | target p95 |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const r of results) {
    console.log(`| ${r.name} | ${r.rows} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | < 300 |`);
  }
} finally {
  for (const child of children) child.kill("SIGTERM");
  await db.end();
  // The services close their pools as they stop (the drop forces out any that is left).
  await new Promise((r) => setTimeout(r, 2_000));
  await dropRunResources({
    serverUrl: serverUrl.toString(),
    database: dbUrl.pathname.slice(1),
    natsUrl,
    stream,
    prefix,
  });
}
