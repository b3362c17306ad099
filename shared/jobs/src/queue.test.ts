/**
 * Only a job type's definition makes a job request: a hand-made one does not compile, and is refused at
 * run time before the database is asked (so a type's attempt limit is always its owner's).
 */
import type { Queries } from "@svc/db";
import { describe, expect, it } from "vitest";

import { enqueueMany } from "./queue.js";
import { defineJob, type JobRequest } from "./types.js";

/** A database that fails the test if it is asked anything. */
const untouched = new Proxy({} as Queries, {
  get: (_, name) => () => {
    throw new Error(`the database was asked (${String(name)})`);
  },
});

describe("enqueueMany", () => {
  it("refuses a request no definition made, before touching the database", async () => {
    // @ts-expect-error a JobRequest can only come from a definition's request()
    const forged: JobRequest = { type: "webhook.deliver", payload: {}, maxAttempts: 100 };
    await expect(enqueueMany(untouched, [forged])).rejects.toThrow(/not made by its type's definition/);
    const made = defineJob<{ n: number }>("made", { maxAttempts: 4 }).request({ n: 1 });
    // One forged request among made ones refuses the whole batch.
    await expect(enqueueMany(untouched, [made, forged])).rejects.toThrow(/"webhook.deliver"/);
  });

  it("a definition's request carries its type's attempt limit unless the enqueuer overrides it", () => {
    const definition = defineJob<Record<string, never>>("limited", { maxAttempts: 7 });
    expect(definition.request({})).toMatchObject({ type: "limited", maxAttempts: 7 });
    expect(definition.request({}, { maxAttempts: 2 })).toMatchObject({ maxAttempts: 2 });
  });
});
