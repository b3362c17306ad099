import type { KV } from "@nats-io/kv";
import { createLogger } from "@svc/observability";
import { describe, expect, it } from "vitest";

import { CircuitBreaker } from "./circuit-breaker.js";

/** Just enough of a KV bucket for recordFailure: one key's value and revision. */
function memoryKv(): KV {
  const values = new Map<string, { value: string; revision: number }>();
  const entry = (key: string) => {
    const v = values.get(key);
    return v === undefined ? null : { operation: "PUT", revision: v.revision, string: () => v.value };
  };
  return {
    get: (key: string) => Promise.resolve(entry(key)),
    create: (key: string, value: string) => {
      values.set(key, { value, revision: 1 });
      return Promise.resolve(1);
    },
    update: (key: string, value: string, revision: number) => {
      values.set(key, { value, revision: revision + 1 });
      return Promise.resolve(revision + 1);
    },
    put: (key: string, value: string) => {
      values.set(key, { value, revision: (values.get(key)?.revision ?? 0) + 1 });
      return Promise.resolve(1);
    },
  } as unknown as KV;
}

describe("circuit counts (svc_webhook_circuits)", () => {
  it("counts an opened circuit as open, then half-open, and not at all once its state expired", async () => {
    const openMs = 30_000;
    const breaker = new CircuitBreaker(memoryKv(), 3, openMs, createLogger("t", "silent"), 60_000);
    expect(breaker.counts()).toEqual({ open: 0, halfOpen: 0 });
    for (let i = 0; i < 2; i++) await breaker.recordFailure("https://a.example");
    expect(breaker.counts()).toEqual({ open: 0, halfOpen: 0 });
    await breaker.recordFailure("https://a.example");
    await breaker.recordFailure("https://b.example");
    const now = Date.now();
    expect(breaker.counts(now)).toEqual({ open: 1, halfOpen: 0 });
    expect(breaker.counts(now + openMs + 1)).toEqual({ open: 0, halfOpen: 1 });
    expect(breaker.counts(now + 25 * 3_600_000)).toEqual({ open: 0, halfOpen: 0 });
    await breaker.recordSuccess("https://a.example");
    expect(breaker.counts(now)).toEqual({ open: 0, halfOpen: 0 });
  });
});
