import { describe, expect, it } from "vitest";

import { deleteInBatches } from "./batches.js";

describe("deleteInBatches", () => {
  it("runs until a run deletes fewer than the limit, and counts them all", async () => {
    let left = 12;
    const limits: number[] = [];
    const deleted = await deleteInBatches(5, async (limit) => {
      limits.push(limit);
      const n = Math.min(limit, left);
      left -= n;
      return n;
    });
    expect(deleted).toBe(12);
    expect(limits).toEqual([5, 5, 5]);
  });

  it("runs once when nothing is to go, and once more after an exact multiple", async () => {
    let runs = 0;
    expect(await deleteInBatches(5, async () => (runs++, 0))).toBe(0);
    expect(runs).toBe(1);
    let left = 10;
    runs = 0;
    expect(
      await deleteInBatches(5, async (limit) => {
        runs++;
        const n = Math.min(limit, left);
        left -= n;
        return n;
      }),
    ).toBe(10);
    expect(runs).toBe(3);
  });

  it("stops after the batch in hand once its signal is aborted, counting what it deleted", async () => {
    const stopping = new AbortController();
    let runs = 0;
    const deleted = await deleteInBatches(
      5,
      async (limit) => {
        runs++;
        if (runs === 2) stopping.abort();
        return limit;
      },
      stopping.signal,
    );
    expect(runs).toBe(2);
    expect(deleted).toBe(10);
  });
});
