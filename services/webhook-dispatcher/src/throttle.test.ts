import type { KV } from "@nats-io/kv";
import { createLogger } from "@svc/observability";
import { describe, expect, it } from "vitest";

import { Throttle } from "./throttle.js";

/** A bucket with NATS's compare-and-set rules (the integration test runs the real one across replicas). */
function memoryBucket(reachable: () => boolean = () => true) {
  const entries = new Map<string, { value: string; revision: number }>();
  let sequence = 0;
  const check = () => {
    if (!reachable()) throw new Error("TIMEOUT");
  };
  return {
    async get(key: string) {
      check();
      const e = entries.get(key);
      return e === undefined ? null : { operation: "PUT", revision: e.revision, string: () => e.value };
    },
    async create(key: string, value: string) {
      check();
      if (entries.has(key)) throw new Error(`wrong last sequence: ${entries.get(key)?.revision}`);
      entries.set(key, { value, revision: ++sequence });
      return sequence;
    },
    async update(key: string, value: string, revision: number) {
      check();
      const e = entries.get(key);
      if (e?.revision !== revision) throw new Error(`wrong last sequence: ${e?.revision ?? 0}`);
      entries.set(key, { value, revision: ++sequence });
      return sequence;
    },
  } as unknown as KV;
}

const log = createLogger("throttle-test", "silent");

/** Two dispatchers' throttles sharing one bucket and one clock. */
const twoReplicas = (bucket: KV, clock: () => number) =>
  [0, 1].map(() => new Throttle(() => bucket, log, clock));

/** `count` admissions of one subscription, alternating between the replicas; how many were allowed. */
async function allowedOf(replicas: readonly Throttle[], count: number, limit: number): Promise<number> {
  const decisions = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      (replicas[i % replicas.length] as Throttle).admit("sub-1", limit),
    ),
  );
  return decisions.filter((d) => d.allowed).length;
}

describe("the subscription throttle", () => {
  it("admits the limit per second across replicas sharing the bucket, and tells when to look again", async () => {
    let now = 1_000_000_250;
    const bucket = memoryBucket();
    const replicas = twoReplicas(bucket, () => now);
    const decisions = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (replicas[i % 2] as Throttle).admit("sub-1", 5)),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
    // Refused ones look again at the next second (750 ms away, and a little more).
    for (const d of decisions.filter((x) => !x.allowed)) expect(d.retryInMs).toBeGreaterThanOrEqual(750);
    // Another subscription has its own count; the next second starts a new one.
    expect((await replicas[0]?.admit("sub-2", 5))?.allowed).toBe(true);
    now += 1_000;
    expect(await allowedOf(replicas.slice(1), 7, 5)).toBe(5);
  });

  it("counts per replica while the bucket is out of reach, and shares the count again once it is back", async () => {
    const now = 2_000_000_000;
    let up = false;
    const bucket = memoryBucket(() => up);
    const replicas = twoReplicas(bucket, () => now);
    // Each replica holds the limit on its own: 3 each.
    expect(await allowedOf(replicas, 12, 3)).toBe(6);
    up = true;
    expect(await allowedOf(replicas, 12, 3)).toBe(3);
  });
});
