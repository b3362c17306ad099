import { describe, expect, it } from "vitest";

import { coalesce } from "./coalesce.js";

describe("coalesce", () => {
  it("runs one at a time and once more for the calls made meanwhile", async () => {
    let runs = 0;
    let concurrent = 0;
    let most = 0;
    const task = coalesce(async () => {
      runs++;
      concurrent++;
      most = Math.max(most, concurrent);
      await new Promise((r) => setTimeout(r, 20));
      concurrent--;
    });
    const first = task();
    const folded = [task(), task(), task()];
    await Promise.all([first, ...folded]);
    expect(most).toBe(1);
    // The first run, then one more for the three calls made while it ran.
    expect(runs).toBe(2);
    await task();
    expect(runs).toBe(3);
  });

  it("runs again after a failure", async () => {
    let calls = 0;
    const task = coalesce(async () => {
      calls++;
      if (calls === 1) throw new Error("first fails");
    });
    await expect(task()).rejects.toThrow("first fails");
    await expect(task()).resolves.toBeUndefined();
    expect(calls).toBe(2);
  });
});
