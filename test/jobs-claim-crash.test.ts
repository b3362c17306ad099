/**
 * A claim commits without waiting for the disk (shared/jobs/src/queries.ts, `leaseDue`): here PostgreSQL
 * crashes right after one, before its WAL left shared memory (a server of the test's own, its WAL writer
 * frozen, then every process killed with SIGKILL). Asserted: the claim is lost and the job is Pending as
 * before it (it runs again: at least once, never lost), the job enqueued just before (a synchronous
 * commit) survives, the next claim's fencing token is new and larger although the sequence went back
 * with the crash, and the lost claim's late write-back is refused while the new claim's counts.
 */
import { createDb, type Db, sql } from "@svc/db";
import { enqueue, JobStatus, noopJob } from "@svc/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { migrateAll } from "../scripts/lib/stack.js";
// Internal SQL of the engine, reached by path: the test drives single transitions directly.
import { claimJobs, completeJobs } from "../shared/jobs/src/queries.js";
import { OwnPostgres, postgresBin } from "./support/own-postgres.js";
import { until } from "./support/wait.js";

const available = postgresBin() !== undefined;
const server = available ? new OwnPostgres() : undefined;
let url = "";

beforeAll(async () => {
  if (server === undefined) return;
  await server.start();
  url = server.url("svc_claim_crash");
  await migrateAll(url);
}, 120_000);
afterAll(async () => {
  await server?.dispose();
});

async function row(db: Db, id: string) {
  return db.one<{ status: string; attempts: number; lease_token: string | null }>(
    sql`SELECT status, attempts, lease_token::text FROM job_reaper.jobs WHERE id = ${id}`,
  );
}

/** A pool that answers again after the server came back (its connections died with the crash). */
async function reachable(db: Db) {
  await until(async () => {
    try {
      await db.query(sql`SELECT 1`);
      return true;
    } catch {
      return false;
    }
  }, 30_000);
}

describe.skipIf(!available)("a claim lost in a PostgreSQL crash", () => {
  it("leaves the job Pending to run again, and the lost claim's token is never handed out again", async () => {
    const db = createDb({ databaseUrl: url, maximumPoolSize: 2, applicationName: "claim-crash" });
    try {
      // Tokens handed out before, so the sequence has logged its advance ahead of the lost claim.
      const { id: warm } = await enqueue(db, noopJob, {});
      const [warmClaim] = await claimJobs(db, noopJob.type, 1, 60_000, "warm-up");
      expect(await completeJobs(db, [{ id: warm, token: warmClaim?.token as string }])).toEqual(
        new Set([warm]),
      );

      const { id } = await enqueue(db, noopJob, {});
      // The first sequence value after a checkpoint writes the sequence's WAL record: lost with the claim,
      // so the sequence goes back too.
      await db.query(sql`CHECKPOINT`);
      server?.pauseWalWriter();
      let lost: string;
      try {
        const claimed = await claimJobs(db, noopJob.type, 1, 60_000, "first");
        expect(claimed.map((j) => j.id)).toEqual([id]);
        lost = claimed[0]?.token as string;
        // Seen by others at once (the commit happened), only not yet on disk.
        expect(await row(db, id)).toMatchObject({
          status: JobStatus.Running,
          attempts: 1,
          lease_token: lost,
        });
      } finally {
        server?.kill();
      }
      await server?.up();
      await reachable(db);

      // The claim is gone with the crash; the job enqueued (synchronously) before it is not.
      expect(await row(db, id)).toMatchObject({ status: JobStatus.Pending, attempts: 0, lease_token: null });
      // The sequence went back: on its own it would hand the lost claim's value out again.
      const sequence = await db.one<{ last: string }>(
        sql`SELECT last_value::text AS last FROM job_reaper.fencing_tokens`,
      );
      expect(BigInt(sequence.last)).toBeLessThan(BigInt(lost) % 1048576n);
      const [again] = await claimJobs(db, noopJob.type, 1, 60_000, "second");
      expect(again?.id).toBe(id);
      expect(again?.attempt).toBe(1);
      expect(BigInt(again?.token as string)).toBeGreaterThan(BigInt(lost));
      // The first run's late write-back is refused; the second's counts.
      expect(await completeJobs(db, [{ id, token: lost }])).toEqual(new Set());
      expect((await row(db, id)).status).toBe(JobStatus.Running);
      expect(await completeJobs(db, [{ id, token: again?.token as string }])).toEqual(new Set([id]));
      expect((await row(db, id)).status).toBe(JobStatus.Succeeded);
    } finally {
      await db.end();
    }
  }, 60_000);
});
