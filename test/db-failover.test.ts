/**
 * A terminated database connection (57P01, what a failover or pg_terminate_backend
 * sends) fails no idempotent read: it runs again on a fresh connection. A write is not run again.
 */
import { createDb, isReadOnly, sql } from "@svc/db";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";

const h = await createHarness({ seed: false });
const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 2, applicationName: "failover-test" });
const admin = new pg.Client({ connectionString: h.db.url });
await admin.connect();
afterAll(async () => {
  await db.end();
  await admin.end();
});

/** Terminates the backends of this test's pool once one of them is running `pattern`. */
async function terminateWhileRunning(pattern: string) {
  for (let i = 0; i < 200; i++) {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
       WHERE application_name = 'failover-test' AND state = 'active' AND query LIKE $1`,
      [`%${pattern}%`],
    );
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("the statement never started");
}

describe("reads survive a terminated connection", () => {
  it("runs a read again on a fresh connection when its connection is terminated mid-statement", async () => {
    // The outcome is captured at once: a rejection must not go unhandled while the test terminates.
    const read = db.one<{ answer: number }>(sql`SELECT 42 AS answer, pg_sleep(1) AS slept`).then(
      (row) => row,
      (error: unknown) => error,
    );
    await terminateWhileRunning("pg_sleep(1)");
    expect(await read).toEqual({ answer: 42, slept: "" });
  });

  it("does not run a write again: the caller sees the failure", async () => {
    await db.query(sql`CREATE TABLE IF NOT EXISTS public.failover_writes (n int)`);
    const write = db.query(sql`INSERT INTO public.failover_writes SELECT 1 FROM pg_sleep(1)`).then(
      () => "ran",
      (error: unknown) => error,
    );
    await terminateWhileRunning("failover_writes");
    expect(await write).toMatchObject({ code: "57P01" });
  });

  it("tells reads from writes", () => {
    expect(isReadOnly("SELECT * FROM t WHERE a = $1")).toBe(true);
    expect(isReadOnly("  with x as (select 1) select * from x")).toBe(true);
    expect(isReadOnly("WITH due AS (SELECT id FROM t FOR UPDATE SKIP LOCKED) UPDATE t SET a = 1")).toBe(
      false,
    );
    expect(isReadOnly("SELECT nextval('s')")).toBe(false);
    expect(isReadOnly("INSERT INTO t VALUES (1)")).toBe(false);
    expect(isReadOnly("SELECT * FROM t FOR SHARE")).toBe(false);
  });
});
