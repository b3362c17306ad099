/**
 * `make bench BENCH_ARGS="--only growth"`: the figures that depend on how much data there is, each measured
 * on small tables first and then again at volume, in one run:
 *   - jobs: 20,000 jobs run on an empty queue, then again beside 1,000,000 queued ones (half scheduled for
 *     tomorrow, half due of a type no running worker takes: a plugin's worker that is down); the list's
 *     first page (the job reaper's query) on each;
 *   - webhooks: publish-to-receipt at a steady 500 events/s with one subscription, then with 10,000 over
 *     1,000 workspaces (none of the others match), and the match query's time per event in a batch of 100;
 *   - identity: sign-in and the users list paged to the end, with 100 users, then 100,000 users, 1,000
 *     workspaces and 10,000 memberships; a workspace session's list (its members among them all);
 *   - resolution: public resolve through the gateway, each host and path the first time (the gateway's
 *     cache cold) and again (warm), with 100 workspaces, then 10,000 (each on its own host and under a path
 *     of its tenant's host);
 *   - plugins: activation p95 and the registry's start-up time (every stored package verified again, the
 *     active ones loaded) with one plugin installed, then with 50 installed and 20 active.
 * The stack runs built, in production mode, on a database, subject prefix and stream of its own.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { join } from "node:path";

import { createDb, sql } from "@svc/db";
import { listJobs } from "@svc/jobs";
import pg from "pg";

import {
  DEMO,
  dropDatabase,
  dropRunResources,
  freePort,
  migrateAll,
  repoRoot,
  seedDemo,
  SERVICES,
  waitFor,
} from "../../scripts/lib/stack.js";
import { productionEnv, SERVICE_NODE_FLAGS, stopChild } from "./env.js";
import { benchOurs, type JobsBenchResult } from "./jobs.js";
import { benchSignerEnv, onePackage } from "./plugins.js";
import { percentile, sorted } from "./stats.js";
import { runWebhooksBench, type WebhooksBenchResult } from "./webhooks.js";

const log = (line: string) => process.stderr.write(`[bench] growth: ${line}\n`);

/** p50, p95 and the slowest of a set of timings (ms). */
interface Spread {
  readonly p50: number;
  readonly p95: number;
  readonly max: number;
  readonly n: number;
}
const spread = (times: readonly number[]): Spread => {
  const s = sorted(times);
  return { p50: percentile(s, 50), p95: percentile(s, 95), max: s.at(-1) ?? Number.NaN, n: s.length };
};

/** One phase of the stack's part: the figures on its tables. */
interface StackFigures {
  readonly users: number;
  readonly workspaces: number;
  readonly signIn: Spread;
  readonly usersPages: Spread & { readonly pages: number };
  readonly memberList: Spread;
  readonly resolveCold: Spread;
  readonly resolveWarm: Spread;
  readonly plugins: { installed: number; active: number };
  readonly activation: Spread;
  readonly registryStartMs: number;
}

export interface GrowthResult {
  readonly jobs?: { small: JobsBenchResult; large: JobsBenchResult; listSmall: Spread; listLarge: Spread };
  readonly backlog: number;
  readonly webhooks?: { one: WebhooksBenchResult; many: WebhooksBenchResult };
  readonly stack?: { small: StackFigures; large: StackFigures };
  readonly seconds: number;
}

/** The parts of the growth benchmark (`--parts`, comma-separated; all by default). */
export const GROWTH_PARTS = ["jobs", "webhooks", "stack"] as const;

async function timeList(db: ReturnType<typeof createDb>): Promise<Spread> {
  const times: number[] = [];
  for (let i = 0; i < 110; i++) {
    const t0 = performance.now();
    await listJobs(db, { limit: 50 });
    if (i >= 10) times.push(performance.now() - t0);
  }
  return spread(times);
}

async function jobsPart(serverUrl: URL, stamp: string, backlog: number) {
  const url = new URL(serverUrl);
  url.pathname = `/svc_bench_growjobs_${stamp}`;
  await migrateAll(url.toString());
  const db = createDb({ databaseUrl: url.toString(), maximumPoolSize: 2, applicationName: "bench-growth" });
  try {
    log("jobs: 20,000 on an empty queue");
    const small = await benchOurs(url.toString(), 20_000, 10);
    const listSmall = await timeList(db);
    log(`jobs: writing ${backlog.toLocaleString("en")} queued jobs`);
    for (let from = 1; from <= backlog; from += 100_000) {
      const to = Math.min(backlog, from + 99_999);
      await db.query(sql`
        INSERT INTO job_reaper.jobs (type, status, workspace_key, payload, max_attempts, run_at, created_at)
        SELECT CASE WHEN i % 2 = 0 THEN 'noop' ELSE 'crm.sync' END, 'Pending', 'ws-' || (i % 1000), '{}'::jsonb, 5,
               CASE WHEN i % 2 = 0 THEN now() + interval '1 day' + make_interval(secs => i % 86400)
                    ELSE now() - make_interval(secs => i % 86400) END,
               now() - make_interval(secs => i % 86400)
        FROM generate_series(${from}::int, ${to}::int) AS i`);
    }
    await db.query(sql`VACUUM ANALYZE job_reaper.jobs`);
    log("jobs: 20,000 beside the queued ones");
    const large = await benchOurs(url.toString(), 20_000, 10, true);
    const listLarge = await timeList(db);
    return { small, large, listSmall, listLarge };
  } finally {
    await db.end();
    await dropDatabase(serverUrl.toString(), url.pathname.slice(1));
    // Written out now, not by a checkpoint in the middle of the next part's measurement.
    const admin = new pg.Client({ connectionString: serverUrl.toString() });
    await admin.connect();
    await admin.query("CHECKPOINT").catch(() => undefined);
    await admin.end();
  }
}

/** The stack's part: identity, resolution and plugins, small then at volume. */
async function stackPart(
  serverUrl: URL,
  stamp: string,
): Promise<{ small: StackFigures; large: StackFigures }> {
  const dbUrl = new URL(serverUrl);
  const database = `svc_bench_grow_${stamp}`;
  dbUrl.pathname = `/${database}`;
  const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
  const prefix = `benchgrow${stamp}`;
  const stream = `SVC_EVENTS_BENCHGROW${stamp.toUpperCase()}`;
  const children = new Map<string, ChildProcess>();
  execFileSync(process.execPath, [join(repoRoot, "scripts", "build.mjs")], {
    cwd: repoRoot,
    stdio: "ignore",
  });
  await migrateAll(dbUrl.toString());
  await seedDemo(dbUrl.toString(), { withAdmin: true });
  const port = await freePort();
  const env = {
    ...process.env,
    ...productionEnv({ databaseUrl: dbUrl.toString(), natsUrl, prefix, stream }),
    ...benchSignerEnv(),
    GATEWAY_HOST: "127.0.0.1",
    GATEWAY_PORT: String(port),
    BackendHost__RateLimitApiPerMinute: "1000000000",
    BackendHost__RateLimitAuthPerMinute: "1000000",
    BackendHost__RateLimitAuthPerAccountPerMinute: "1000000",
  };
  const startService = (name: string) => {
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, join("dist", `${name}.mjs`)], {
      cwd: repoRoot,
      env,
      stdio: ["ignore", "ignore", "inherit"],
    });
    children.set(name, child);
    return child;
  };
  const db = new pg.Client({ connectionString: dbUrl.toString() });
  await db.connect();
  const gateway = `http://127.0.0.1:${port}`;
  try {
    for (const name of SERVICES) startService(name);
    await waitFor(
      `${gateway}/ready`,
      async () => (await fetch(`${gateway}/ready`).catch(() => undefined))?.ok === true,
      60_000,
    );
    const { hashPassword } = await import("../../services/rbac/src/passwords.js");
    // One hash for every bulk user (the same password): scrypt per row would take most of the run.
    const hash = await hashPassword("grow-password");
    const signIn = async (username: string, password: string, workspaceKey?: string) => {
      const r = await fetch(`${gateway}/api/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username, password, ...(workspaceKey ? { workspaceKey } : {}) }),
      });
      const body = (await r.json()) as { accessToken?: string };
      if (!r.ok || body.accessToken === undefined)
        throw new Error(`sign-in of ${username} answered ${r.status}: ${JSON.stringify(body)}`);
      return body.accessToken;
    };
    const operator = { authorization: `Bearer ${await signIn(DEMO.adminUserName, DEMO.adminPassword)}` };
    const member = {
      authorization: `Bearer ${await signIn(DEMO.adminUserName, DEMO.adminPassword, DEMO.workspaceKey)}`,
    };

    /** Users `grow-u<from..to>`, workspaces `gw-<from..to>` (tenant `gt-<i % 1000>`), memberships. */
    const seed = async (users: [number, number], workspaces: [number, number], members: [number, number]) => {
      await db.query(
        `INSERT INTO rbac.users (id, user_name, display_name, password_hash)
         SELECT gen_random_uuid(), 'grow-u' || i, 'Grow ' || i, $3 FROM generate_series($1::int, $2::int) AS i`,
        [users[0], users[1], hash],
      );
      await db.query(
        `INSERT INTO resolver.tenants (key, name)
         SELECT DISTINCT 'gt-' || (i % 1000), 'Tenant ' || (i % 1000) FROM generate_series($1::int, $2::int) AS i
         ON CONFLICT DO NOTHING`,
        [workspaces[0], workspaces[1]],
      );
      await db.query(
        `INSERT INTO resolver.workspaces (key, tenant_key, name)
         SELECT 'gw-' || i, 'gt-' || (i % 1000), 'Workspace ' || i FROM generate_series($1::int, $2::int) AS i`,
        [workspaces[0], workspaces[1]],
      );
      await db.query(
        `INSERT INTO resolver.tenant_hosts (host, tenant_key)
         SELECT h, t FROM (
           SELECT 'gw-' || i || '.grow.test' AS h, 'gt-' || (i % 1000) AS t FROM generate_series($1::int, $2::int) AS i
           UNION SELECT 'gt-' || (i % 1000) || '.grow.test', 'gt-' || (i % 1000) FROM generate_series($1::int, $2::int) AS i
         ) AS x ON CONFLICT DO NOTHING`,
        [workspaces[0], workspaces[1]],
      );
      await db.query(
        `INSERT INTO resolver.workspace_bindings (workspace_key, host, path_prefix)
         SELECT 'gw-' || i, 'gw-' || i || '.grow.test', '/' FROM generate_series($1::int, $2::int) AS i
         UNION ALL
         SELECT 'gw-' || i, 'gt-' || (i % 1000) || '.grow.test', '/gw-' || i FROM generate_series($1::int, $2::int) AS i`,
        [workspaces[0], workspaces[1]],
      );
      // Memberships: user i in workspace gw-(i % 1000), every hundredth in the demo workspace instead.
      await db.query(
        `INSERT INTO rbac.memberships (workspace_key, user_id)
         SELECT CASE WHEN n % 100 = 0 THEN $3 ELSE 'gw-' || (n % 1000) END, u.id
         FROM generate_series($1::int, $2::int) AS n JOIN rbac.users u ON u.user_name = 'grow-u' || n`,
        [members[0], members[1], DEMO.workspaceKey],
      );
      for (const table of [
        "rbac.users",
        "rbac.memberships",
        "resolver.workspaces",
        "resolver.workspace_bindings",
      ])
        await db.query(`ANALYZE ${table}`);
    };

    const measure = async (
      userCount: number,
      workspaceCount: number,
      plugins: { installed: number; active: number },
    ): Promise<StackFigures> => {
      // Sign-in: random users, one at a time.
      const signIns: number[] = [];
      for (let i = 0; i < 100; i++) {
        const name = `grow-u${1 + Math.floor(Math.random() * userCount)}`;
        const t0 = performance.now();
        await signIn(name, "grow-password");
        signIns.push(performance.now() - t0);
      }
      // The users list, 100 a page, to its end (walked again until there are 200 timings).
      const pages: number[] = [];
      let pagesPerWalk = 0;
      while (pages.length < 200) {
        let cursor: string | null = null;
        pagesPerWalk = 0;
        do {
          const query = `limit=100${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;
          const t0 = performance.now();
          const r = await fetch(`${gateway}/api/users?${query}`, { headers: operator });
          const body = (await r.json()) as { items: unknown[]; nextCursor: string | null };
          pages.push(performance.now() - t0);
          if (!r.ok) throw new Error(`GET /api/users answered ${r.status}`);
          cursor = body.nextCursor;
          pagesPerWalk++;
        } while (cursor !== null);
      }
      const memberTimes: number[] = [];
      for (let i = 0; i < 110; i++) {
        const t0 = performance.now();
        const r = await fetch(`${gateway}/api/users?limit=50`, { headers: member });
        await r.arrayBuffer();
        if (!r.ok) throw new Error(`a workspace session's GET /api/users answered ${r.status}`);
        if (i >= 10) memberTimes.push(performance.now() - t0);
      }
      // Resolution: 100 workspaces not asked before, each by its own host and under its tenant's host.
      const picked = new Set<number>();
      while (picked.size < Math.min(100, workspaceCount)) {
        picked.add(
          workspaceCount <= 100 ? picked.size : 100 + Math.floor(Math.random() * (workspaceCount - 100)),
        );
      }
      const asked = [...picked].flatMap((w) => [
        { host: `gw-${w}.grow.test`, uri: "/" },
        { host: `gt-${w % 1000}.grow.test`, uri: `/gw-${w}/about` },
      ]);
      const resolveOnce = async () => {
        const times: number[] = [];
        for (const { host, uri } of asked) {
          const t0 = performance.now();
          const r = await fetch(`${gateway}/workspace/public/resolve`, {
            headers: { host, "x-forwarded-uri": uri },
          });
          const body = (await r.json()) as { workspaceKey?: string | null };
          times.push(performance.now() - t0);
          if (typeof body.workspaceKey !== "string")
            throw new Error(`${host}${uri} did not resolve: ${JSON.stringify(body)}`);
        }
        return spread(times);
      };
      const resolveCold = await resolveOnce();
      const resolveWarm = await resolveOnce();
      // Plugins: activation of grow-0 (installed first) in cycles, then the registry restarted.
      const activation: number[] = [];
      for (let i = 0; i < 30; i++) {
        const t0 = performance.now();
        const r = await fetch(`${gateway}/api/plugins/grow-0/activate`, {
          method: "POST",
          headers: operator,
        });
        await r.arrayBuffer();
        activation.push(performance.now() - t0);
        if (r.status !== 200) throw new Error(`activate answered ${r.status}`);
        const d = await fetch(`${gateway}/api/plugins/grow-0/deactivate`, {
          method: "POST",
          headers: operator,
        });
        await d.arrayBuffer();
      }
      const registry = children.get("plugin-registry") as ChildProcess;
      await stopChild(registry);
      const t0 = performance.now();
      startService("plugin-registry");
      for (;;) {
        const r = await fetch(`${gateway}/api/plugins`, { headers: operator }).catch(() => undefined);
        await r?.arrayBuffer();
        if (r?.status === 200) break;
        if (performance.now() - t0 > 120_000) throw new Error("the registry did not come back in 120 s");
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const registryStartMs = performance.now() - t0;
      return {
        users: userCount,
        workspaces: workspaceCount,
        signIn: spread(signIns),
        usersPages: { ...spread(pages), pages: pagesPerWalk },
        memberList: spread(memberTimes),
        resolveCold,
        resolveWarm,
        plugins,
        activation: spread(activation),
        registryStartMs,
      };
    };

    const install = async (pluginId: string) => {
      const r = await fetch(`${gateway}/api/plugins/install`, {
        method: "POST",
        headers: { ...operator, "content-type": "application/gzip" },
        body: await onePackage(1024, "export class Bench {}\n", [], pluginId),
      });
      if (r.status !== 201) throw new Error(`install of ${pluginId} answered ${r.status}: ${await r.text()}`);
    };

    log("stack: 100 users, 100 workspaces, one plugin");
    await seed([1, 100], [0, 99], [1, 100]);
    await install("grow-0");
    const small = await measure(100, 100, { installed: 1, active: 0 });

    log("stack: writing 100,000 users, 10,000 workspaces, 10,000 memberships; 50 plugins, 20 active");
    await seed([101, 100_000], [100, 9_999], [101, 10_000]);
    for (let i = 1; i < 50; i++) await install(`grow-${i}`);
    for (let i = 1; i <= 20; i++) {
      const r = await fetch(`${gateway}/api/plugins/grow-${i}/activate`, {
        method: "POST",
        headers: operator,
      });
      if (r.status !== 200) throw new Error(`activate grow-${i} answered ${r.status}: ${await r.text()}`);
    }
    const large = await measure(100_000, 10_000, { installed: 50, active: 20 });
    return { small, large };
  } finally {
    await Promise.all([...children.values()].map(stopChild));
    await db.end();
    await dropRunResources({ serverUrl: serverUrl.toString(), database, natsUrl, stream, prefix });
  }
}

export async function runGrowthBench(
  serverUrl: URL,
  stamp: string,
  backlog = 1_000_000,
  parts: ReadonlySet<string> = new Set(GROWTH_PARTS),
): Promise<GrowthResult> {
  const t0 = Date.now();
  const jobs = parts.has("jobs") ? await jobsPart(serverUrl, stamp, backlog) : undefined;
  let webhooks: GrowthResult["webhooks"];
  if (parts.has("webhooks")) {
    log("webhooks: one subscription");
    const one = await runWebhooksBench(serverUrl, `${stamp}g1`, 2_000, 10);
    log("webhooks: 10,000 subscriptions over 1,000 workspaces");
    const many = await runWebhooksBench(
      serverUrl,
      `${stamp}g2`,
      2_000,
      10,
      {},
      {
        subscriptions: 9_999,
        workspaces: 1_000,
      },
    );
    webhooks = { one, many };
  }
  const stack = parts.has("stack") ? await stackPart(serverUrl, stamp) : undefined;
  return {
    ...(jobs && { jobs }),
    ...(webhooks && { webhooks }),
    ...(stack && { stack }),
    backlog,
    seconds: (Date.now() - t0) / 1000,
  };
}

export function printGrowthResults(r: GrowthResult): void {
  const f = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));
  const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
  const row = (what: string, small: string, large: string, target: string) =>
    console.log(`| ${what} | ${small} | ${large} | ${target} |`);
  const { jobs, webhooks, stack } = r;
  console.log(`\nGrowth (${r.seconds.toFixed(0)} s): each figure on small tables, then at volume`);
  console.log("| figure | small | at volume | target |");
  console.log("| --- | ---: | ---: | --- |");
  if (jobs) printJobs(jobs);
  if (webhooks) printWebhooks(webhooks);
  if (stack) printStack(stack);

  function printJobs(jobs: NonNullable<GrowthResult["jobs"]>) {
    const throughput = jobs.large.completedPerSecond / jobs.small.completedPerSecond;
    row(
      `jobs: 20,000 run, completed/s (then beside ${r.backlog.toLocaleString("en")} queued)`,
      f(jobs.small.completedPerSecond),
      f(jobs.large.completedPerSecond),
      `within 20 %: ${(throughput * 100).toFixed(0)} %, ${verdict(throughput >= 0.8)}`,
    );
    const startRatio = jobs.large.latencyP50Ms / jobs.small.latencyP50Ms;
    row(
      "jobs: enqueue-to-start p50 ms",
      f(jobs.small.latencyP50Ms),
      f(jobs.large.latencyP50Ms),
      `within 2x: ${startRatio.toFixed(2)}x, ${verdict(startRatio <= 2)}`,
    );
    row(
      "jobs: list's first page p95 ms (the reaper's query)",
      f(jobs.listSmall.p95),
      f(jobs.listLarge.p95),
      `< 50: ${verdict(jobs.listLarge.p95 < 50)}`,
    );
  }

  function printWebhooks(webhooks: NonNullable<GrowthResult["webhooks"]>) {
    const hookRatio = webhooks.many.latencyP50Ms / webhooks.one.latencyP50Ms;
    row(
      `webhooks: publish-to-receipt p50 ms at 500/s (1 / ${webhooks.many.subscriptions.toLocaleString("en")} subscriptions)`,
      f(webhooks.one.latencyP50Ms),
      f(webhooks.many.latencyP50Ms),
      `within 2x: ${hookRatio.toFixed(2)}x, ${verdict(hookRatio <= 2)}`,
    );
    row(
      "webhooks: publish-to-receipt p99 ms",
      f(webhooks.one.latencyP99Ms),
      f(webhooks.many.latencyP99Ms),
      "",
    );
    row(
      "webhooks: match query, a batch of 100 events, ms per event",
      f(webhooks.one.matchMsPerEvent),
      f(webhooks.many.matchMsPerEvent),
      "",
    );
  }

  function printStack({ small: s, large: l }: NonNullable<GrowthResult["stack"]>) {
    row(
      `identity: sign-in p95 ms (${s.users} / ${l.users.toLocaleString("en")} users)`,
      f(s.signIn.p95),
      f(l.signIn.p95),
      "",
    );
    row(
      `identity: GET /api/users, 100 a page, p95 ms (max) over ${s.usersPages.pages} / ${l.usersPages.pages} pages`,
      `${f(s.usersPages.p95)} (${f(s.usersPages.max)})`,
      `${f(l.usersPages.p95)} (${f(l.usersPages.max)})`,
      `< 50 at any page: ${verdict(l.usersPages.p95 < 50)}`,
    );
    row(
      "identity: a workspace session's GET /api/users p95 ms",
      f(s.memberList.p95),
      f(l.memberList.p95),
      `< 50: ${verdict(l.memberList.p95 < 50)}`,
    );
    row(
      `resolution: public resolve, cache cold, p50 / p95 ms (${s.workspaces} / ${l.workspaces.toLocaleString("en")} workspaces)`,
      `${f(s.resolveCold.p50)} / ${f(s.resolveCold.p95)}`,
      `${f(l.resolveCold.p50)} / ${f(l.resolveCold.p95)}`,
      "",
    );
    row(
      "resolution: public resolve, cache warm, p50 / p95 ms",
      `${f(s.resolveWarm.p50)} / ${f(s.resolveWarm.p95)}`,
      `${f(l.resolveWarm.p50)} / ${f(l.resolveWarm.p95)}`,
      "",
    );
    row(
      `plugins: activation p95 ms (${s.plugins.installed} installed / ${l.plugins.installed} installed, ${l.plugins.active} active)`,
      f(s.activation.p95),
      f(l.activation.p95),
      `<= 50: ${verdict(l.activation.p95 <= 50)}`,
    );
    row(
      "plugins: registry start-up to its first answer, ms",
      f(s.registryStartMs),
      f(l.registryStartMs),
      `< 5,000: ${verdict(l.registryStartMs < 5_000)}`,
    );
  }
}
