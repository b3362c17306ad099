/**
 * The gateway's list of revoked sessions follows its bucket with one watch at a time: a start waits until
 * the watch has delivered what the bucket held, and ends at once when the list is stopped or started again
 * meanwhile, leaving no watch and no timer behind.
 */
import type { KV, KvWatchEntry } from "@nats-io/kv";
import { afterEach, describe, expect, it, vi } from "vitest";

import { RevocationList, REVOCATIONS_COMPLETE_KEY } from "./revocation.js";

/** A bucket holding `entries`, whose watches are made when the test says (`make`); counts them. */
function bucket(entries: Array<{ key: string; value: string }>) {
  const pending: Array<() => void> = [];
  const watches = { made: 0, stopped: 0 };
  const kv = {
    status: async () => ({ values: entries.length }),
    watch: () =>
      new Promise((resolve) =>
        pending.push(() => {
          watches.made++;
          let stopped = false;
          resolve({
            stop: () => {
              stopped = true;
              watches.stopped++;
            },
            async *[Symbol.asyncIterator]() {
              for (const [i, { key, value }] of entries.entries()) {
                if (stopped) return;
                yield {
                  key,
                  operation: "PUT",
                  delta: entries.length - 1 - i,
                  string: () => value,
                } as unknown as KvWatchEntry;
              }
            },
          });
        }),
      ),
  } as unknown as KV;
  const make = async () => {
    while (pending.length === 0) await new Promise((r) => setImmediate(r));
    for (const done of pending.splice(0)) done();
    await new Promise((r) => setImmediate(r));
  };
  return { kv, watches, make };
}

const later = String(Date.now() + 3_600_000);

afterEach(() => {
  vi.useRealTimers();
});

describe("the revocation list", () => {
  it("knows what the bucket held once started, and is ready once rbac marked it complete", async () => {
    const { kv, make } = bucket([
      { key: "session-1", value: later },
      { key: REVOCATIONS_COMPLETE_KEY, value: "1" },
    ]);
    const list = new RevocationList();
    const started = list.start(kv);
    await make();
    await started;
    expect(list.isRevoked("session-1")).toBe(true);
    expect(list.isRevoked("session-2")).toBe(false);
    expect(list.ready).toBe(true);
    list.stop();
  });

  it("stopped while its watch is being made, ends its start, stops the watch as it arrives and sets no timer", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const { kv, watches, make } = bucket([{ key: "session-1", value: later }]);
    const list = new RevocationList();
    const started = list.start(kv);
    list.stop();
    await make();
    await started;
    expect(watches).toEqual({ made: 1, stopped: 1 });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("started again while the first start waits, keeps only the second watch and one timer", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const { kv, watches, make } = bucket([{ key: "session-1", value: later }]);
    const list = new RevocationList();
    const first = list.start(kv);
    const second = list.restart(kv);
    while (watches.made < 2) await make();
    await first;
    await second;
    expect(watches).toEqual({ made: 2, stopped: 1 });
    expect(vi.getTimerCount()).toBe(1);
    expect(list.isRevoked("session-1")).toBe(true);
    list.stop();
    expect(watches.stopped).toBe(2);
    expect(vi.getTimerCount()).toBe(0);
  });
});
