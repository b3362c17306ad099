import { describe, expect, it } from "vitest";

import { BACKOFF_MAX_MS, retryDelayMs } from "./backoff.js";

describe("retryDelayMs", () => {
  it("doubles from a 30-second base", () => {
    const middle = () => 0.5;
    expect([1, 2, 3, 4, 5].map((a) => retryDelayMs(a, middle))).toEqual([
      30_000, 60_000, 120_000, 240_000, 480_000,
    ]);
  });

  it("jitters within ±10 %", () => {
    expect(retryDelayMs(1, () => 0)).toBe(27_000);
    expect(retryDelayMs(1, () => 1)).toBe(33_000);
  });

  it("is capped at one day", () => {
    expect(retryDelayMs(40, () => 1)).toBe(BACKOFF_MAX_MS);
  });

  it("honours a longer Retry-After, never a shorter one", () => {
    expect(retryDelayMs(1, () => 0.5, 90_000)).toBe(90_000);
    expect(retryDelayMs(1, () => 0.5, 1_000)).toBe(30_000);
    expect(retryDelayMs(1, () => 0.5, 10 * BACKOFF_MAX_MS)).toBe(BACKOFF_MAX_MS);
  });
});
