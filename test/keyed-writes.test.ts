/**
 * On the real database: how a service keeps a keyed write's outcome with its change
 * (`KeyedOutcomes` over `Db.unitOfWork`). Two requests with one key at once run the work once and both get
 * its answer; a 4xx answer is kept while the handler's changes are rolled back; a 5xx keeps nothing and
 * changes nothing; announcements wait for the commit and are dropped with a rollback.
 */
import { afterCommit, createDb, sql } from "@svc/db";
import { ConflictError, ErrorCode, InternalError } from "@svc/errors";
import { KeyedOutcomes } from "@svc/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { until } from "./support/wait.js";

const h = await createHarness({ seed: false });
const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 5, applicationName: "keyed-writes-test" });
const outcomes = new KeyedOutcomes(db, "keyed_test", "transaction");

beforeAll(async () => {
  await db.query(sql`CREATE SCHEMA keyed_test`);
  await db.query(sql`CREATE TABLE keyed_test.things (name text PRIMARY KEY)`);
  // The table every service's migration creates.
  await db.query(sql`
    CREATE TABLE keyed_test.idempotency_outcomes (
      key text PRIMARY KEY, fingerprint text NOT NULL, status integer, reply jsonb, error jsonb,
      created_at timestamptz NOT NULL DEFAULT now())`);
});
afterAll(() => db.end());

const things = async (name: string) =>
  (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM keyed_test.things WHERE name = ${name}`)).n;

/** A handler as a service writes one: statements on the Db, one of them in a transaction of its own. */
function createThing(name: string, announced: string[], gate: Promise<void> = Promise.resolve()) {
  return async () => {
    await db.transaction(async (tx) => {
      await tx.query(sql`INSERT INTO keyed_test.things (name) VALUES (${name})`);
    });
    afterCommit(() => announced.push(name));
    // Still at work until the test opens the gate.
    await gate;
    const row = await db.one<{ name: string }>(sql`SELECT name FROM keyed_test.things WHERE name = ${name}`);
    return { status: 201, body: { name: row.name, at: Date.now() } };
  };
}

describe("KeyedOutcomes", () => {
  it("runs two requests with one key once: the second, while the first runs, is a 409; later it replays", async () => {
    const announced: string[] = [];
    let started = false;
    let open = () => undefined as void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const first = outcomes.run("caller\nk1", "fp", () => {
      started = true;
      return createThing("one", announced, gate)();
    });
    // While the first runs, the same key again (a client that gave up on a 504 and retried) is answered
    // at once, with no connection held waiting.
    await until(async () => started);
    const second = await outcomes
      .run("caller\nk1", "fp", createThing("one", announced))
      .catch((e: unknown) => e);
    expect(second).toMatchObject({ code: ErrorCode.Conflict, status: 409 });
    expect((second as Error).message).toMatch(/still being processed/);
    open();
    const a = await first;
    expect(a).toMatchObject({ status: 201, body: { name: "one" } });
    const b = await outcomes.run("caller\nk1", "fp", createThing("one", announced));
    expect((a as { body: unknown }).body).toEqual((b as { body: unknown }).body);
    expect((b as { headers?: Record<string, string> }).headers?.["idempotency-replayed"]).toBe("true");
    expect(await things("one")).toBe(1);
    expect(announced).toEqual(["one"]);
  });

  it("answers 422 for the same key with another request", async () => {
    await outcomes.run("caller\nk2", "fp-a", createThing("two", []));
    await expect(outcomes.run("caller\nk2", "fp-b", createThing("two-b", []))).rejects.toMatchObject({
      code: "SVC_IDEMPOTENCY_KEY_REUSED",
    });
    expect(await things("two-b")).toBe(0);
  });

  it("keeps a 4xx answer with the handler's changes rolled back, and keeps nothing of a 5xx", async () => {
    const announced: string[] = [];
    const refused = async () => {
      await createThing("three", announced)();
      throw new ConflictError("refused after writing");
    };
    await expect(outcomes.run("caller\nk3", "fp", refused)).rejects.toBeInstanceOf(ConflictError);
    expect(await things("three")).toBe(0);
    expect(announced).toEqual([]);
    // Replayed: the work does not run again.
    await expect(outcomes.run("caller\nk3", "fp", createThing("three", announced))).rejects.toMatchObject({
      code: "SVC_CONFLICT",
      message: "refused after writing",
    });
    expect(await things("three")).toBe(0);

    const failing = async () => {
      await createThing("four", announced)();
      throw new InternalError();
    };
    await expect(outcomes.run("caller\nk4", "fp", failing)).rejects.toBeInstanceOf(InternalError);
    expect(await things("four")).toBe(0);
    // Nothing was kept: the retry runs.
    await expect(outcomes.run("caller\nk4", "fp", createThing("four", announced))).resolves.toMatchObject({
      status: 201,
    });
    expect(await things("four")).toBe(1);
    expect(announced).toEqual(["four"]);
  });

  it("keeps keys per caller", async () => {
    await outcomes.run("caller\nk5", "fp", createThing("five", []));
    await expect(outcomes.run("someone-else\nk5", "fp", createThing("five", []))).rejects.toMatchObject({
      code: "23505",
    });
  });
});
