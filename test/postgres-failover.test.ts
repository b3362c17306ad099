/**
 * PostgreSQL lost and back under load. The platform runs on a PostgreSQL server of the
 * test's own (support/own-postgres.ts: the machine's shared server is never stopped), which is stopped
 * with `pg_ctl -m immediate` (every connection cut, no checkpoint: what the old primary's clients see in a
 * failover) while users are created one after another and jobs run, and started again on the same
 * address (the new primary behind the same name). Asserted: every user the API said it created is
 * delivered to the webhook (the outbox loses nothing), every refusal meanwhile is a 503 with Retry-After,
 * the services answer again without a restart, and every job enqueued before the loss succeeds, run
 * again only when its completion was not recorded before the cut (at least once, never lost).
 */
import { createDb, type Db, sql } from "@svc/db";
import { defineJob, enqueueMany, JobStatus, JobWorker, reapExpiredLeases } from "@svc/jobs";
import { createLogger } from "@svc/observability";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { migrateAll, seedDemo } from "../scripts/lib/stack.js";
import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { OwnPostgres, postgresBin } from "./support/own-postgres.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const available = postgresBin() !== undefined;
const h = await createHarness({ seed: false });
// Made only where PostgreSQL is installed (the file's tests are skipped elsewhere).
const server = available ? new OwnPostgres() : undefined;
const receiver = new Receiver();
let url = "";
let base = "";
let operator = "";
let db: Db;
const api = bearerApi(() => base);

beforeAll(async () => {
  if (server === undefined) return;
  await server.start();
  url = server.url("svc_failover");
  await migrateAll(url);
  await seedDemo(url);
  const env = {
    DATABASE_URL: url,
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  };
  await h.start(rbacService, env);
  await h.start(webhookDispatcherService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  await receiver.start();
  operator = await mintToken({ scope: "platform", roles: ["superadmin"], sub: "op-pg-failover" });
  db = createDb({ databaseUrl: url, maximumPoolSize: 4, applicationName: "failover-jobs" });
}, 120_000);
afterAll(async () => {
  await h.stopAll();
  await db?.end();
  await receiver.stop();
  await server?.dispose();
});

const countJob = defineJob<{ n: number }>("failover.count", { maxAttempts: 25 });

describe.skipIf(!available)("PostgreSQL lost and back", () => {
  it("loses no event and no job, refuses with 503 meanwhile, and serves again without a restart", async () => {
    const hook = await api("POST", "/api/webhooks", operator, {
      eventName: "user.created",
      targetUrl: receiver.url,
      secret: "failover-hook-secret",
    });
    expect(hook.status, hook.text).toBe(201);

    // Jobs enqueued before the loss, worked through while the database goes and comes back.
    const jobs = 400;
    await enqueueMany(
      db,
      Array.from({ length: jobs }, (_, n) => countJob.request({ n })),
    );
    const runs = new Map<number, number>();
    const ranAt: number[] = [];
    // The second half waits for the loss, so that the work spans it however fast the first half runs.
    let databaseGone = () => undefined as void;
    const gone = new Promise<void>((resolve) => (databaseGone = resolve));
    const worker = new JobWorker({
      db,
      databaseUrl: url,
      workerId: "failover-worker",
      log: createLogger("failover-jobs", "silent"),
      leaseMs: 2_000,
      pollIntervalMs: 250,
    });
    worker.register(countJob, {
      concurrency: 4,
      handler: async ({ payload }) => {
        if (payload.n >= jobs / 2) await gone;
        runs.set(payload.n, (runs.get(payload.n) ?? 0) + 1);
        ranAt.push(Date.now());
        await new Promise((resolve) => setTimeout(resolve, 25));
      },
    });
    await worker.start();

    const made: string[] = [];
    const refused: Array<{ status: number; retryAfter: string }> = [];
    let downAt = 0;
    let upAt = 0;
    let firstOkAfterUp = 0;
    for (let n = 0; n < 80; n++) {
      if (n === 20) {
        server?.stop("immediate");
        downAt = Date.now();
        databaseGone();
      }
      if (n === 30) {
        await server?.up();
        upAt = Date.now();
      }
      const answer = await api("POST", "/api/users", operator, {
        userName: `failover-user-${n}`,
        password: "a long password 3",
      });
      if (answer.status === 201) {
        made.push(answer.json<{ id: string }>().id);
        if (upAt > 0 && firstOkAfterUp === 0) firstOkAfterUp = Date.now();
      } else {
        refused.push({ status: answer.status, retryAfter: String(answer.headers["retry-after"] ?? "") });
        if (upAt > 0) await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    expect(downAt).toBeGreaterThan(0);
    // The database was away for ten requests at least: some were refused, each a 503 to retry.
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.status).toBe(503);
      expect(r.retryAfter).toMatch(/^\d+$/);
    }
    // Back without a restart of any service: the last requests all succeeded.
    expect(firstOkAfterUp).toBeGreaterThan(0);
    expect(made.length + refused.length).toBe(80);

    // Every user the API said it created is delivered (at least once).
    await receiver.waitForUsers(made);

    // Every job succeeds: leases cut short by the loss expire and are taken again (the job reaper's sweep).
    await until(
      async () => {
        await reapExpiredLeases(db).catch(() => undefined);
        const [row] = await db.any<{ done: number }>(sql`
          SELECT count(*)::int AS done FROM job_reaper.jobs
          WHERE type = 'failover.count' AND status = ${JobStatus.Succeeded}`);
        return row?.done === jobs;
      },
      60_000,
      250,
    );
    await worker.stop();
    // The jobs were being worked through when the database went: some ran before, some after it was back.
    expect(Math.min(...ranAt)).toBeLessThan(downAt);
    expect(Math.max(...ranAt)).toBeGreaterThan(upAt);
    const ran = [...runs.values()];
    expect(runs.size).toBe(jobs);
    const again = ran.filter((count) => count > 1).length;
    // Run again only when the loss cut it short: at most what the worker held when the database went,
    // 4 running and up to 12 claimed behind them (a lane claims its batch of 8 again when 4 or fewer wait).
    expect(again).toBeLessThanOrEqual(16);

    console.log(
      `postgres failover: database away ${upAt - downAt} ms; ${made.length} users created, ` +
        `${refused.length} refused with 503; first success ${firstOkAfterUp - upAt} ms after it was back; ` +
        `all delivered; ${jobs} jobs succeeded, ${again} of them run twice`,
    );
  }, 180_000);
});
