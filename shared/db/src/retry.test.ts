import { describe, expect, it } from "vitest";

import { isRetryableDbError, withRetry } from "./retry.js";

const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code });

describe("isRetryableDbError", () => {
  it.each(["40001", "40P01", "57P03", "08006"])("retries SQLSTATE %s", (code) => {
    expect(isRetryableDbError(pgError(code))).toBe(true);
  });
  it.each(["23505", "42P01", "22P02"])("does not retry SQLSTATE %s", (code) => {
    expect(isRetryableDbError(pgError(code))).toBe(false);
  });
  it("looks through the cause chain", () => {
    expect(isRetryableDbError(new Error("wrapped", { cause: pgError("40001") }))).toBe(true);
  });
});

describe("withRetry", () => {
  it("runs a retryable failure again until it succeeds", async () => {
    let calls = 0;
    const result = await withRetry(
      async () => {
        calls++;
        if (calls < 3) throw pgError("40001");
        return "done";
      },
      { minTimeoutMs: 1, maxTimeoutMs: 2 },
    );
    expect(result).toBe("done");
    expect(calls).toBe(3);
  });

  it("rethrows a non-retryable failure at once", async () => {
    let calls = 0;
    await expect(
      withRetry(async () => {
        calls++;
        throw pgError("23505");
      }),
    ).rejects.toThrow("pg 23505");
    expect(calls).toBe(1);
  });
});
