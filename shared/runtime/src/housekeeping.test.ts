import { createLogger } from "@svc/observability";
import { afterEach, describe, expect, it, vi } from "vitest";

import { startHousekeeping } from "./housekeeping.js";

const log = createLogger("housekeeping-test", "silent");
afterEach(() => {
  vi.useRealTimers();
});

describe("housekeeping", () => {
  it("runs at once and at each turn, never two runs at a time, and stop waits for the run in progress", async () => {
    vi.useFakeTimers();
    let started = 0;
    let finish: () => void = () => undefined;
    const task = startHousekeeping(
      1_000,
      () =>
        new Promise<void>((resolve) => {
          started++;
          finish = resolve;
        }),
      log,
      "failed",
    );
    expect(started).toBe(1);
    // Turns that come while the first run goes on add none.
    await vi.advanceTimersByTimeAsync(3_000);
    expect(started).toBe(1);
    finish();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(started).toBe(2);
    let stopped = false;
    const stopping = task.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    finish();
    await stopping;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(started).toBe(2);
  });

  it("tries again at the next turn after a failure", async () => {
    vi.useFakeTimers();
    let runs = 0;
    const task = startHousekeeping(
      1_000,
      async () => {
        runs++;
        if (runs === 1) throw new Error("database away");
      },
      log,
      "failed",
    );
    await vi.advanceTimersByTimeAsync(1_000);
    expect(runs).toBe(2);
    await task.stop();
  });

  it("aborts the signal of the run in progress when stopped, and waits for that run to end", async () => {
    let signal: AbortSignal | undefined;
    let finish: () => void = () => undefined;
    const task = startHousekeeping(
      1_000,
      (s) =>
        new Promise<void>((resolve) => {
          signal = s;
          finish = resolve;
        }),
      log,
      "failed",
    );
    expect(signal?.aborted).toBe(false);
    let stopped = false;
    const stopping = task.stop().then(() => {
      stopped = true;
    });
    expect(signal?.aborted).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(stopped).toBe(true);
  });
});
