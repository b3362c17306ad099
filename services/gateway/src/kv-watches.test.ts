/**
 * The gateway's watches of KV buckets end with what owns them, also when the owner stops (or starts
 * again) while a watch is still being made: a watch left running outlives its owner, its heartbeat
 * monitor ticking on a closed connection.
 */
import type { KV } from "@nats-io/kv";
import { createLogger } from "@svc/observability";
import { describe, expect, it } from "vitest";

import { RateLimiter } from "./auth/rate-limiter.js";
import { ManifestWatch } from "./product-plugins/ui-assets.js";

/** A bucket whose watches are made when the test says (`make`), counting those made and stopped. */
function slowWatchKv() {
  const pending: Array<() => void> = [];
  const watches = { made: 0, stopped: 0 };
  const kv = {
    watch: () =>
      new Promise((resolve) =>
        pending.push(() => {
          watches.made++;
          resolve({
            stop: () => void watches.stopped++,
            async *[Symbol.asyncIterator]() {
              // no entries
            },
          });
        }),
      ),
  } as unknown as KV;
  /** Makes every watch asked for so far, and lets their callers go on. */
  const make = async () => {
    for (const done of pending.splice(0)) done();
    await new Promise((r) => setImmediate(r));
  };
  return { kv, watches, make };
}

const limits = { api: 600, auth: 10, account: 5 };
const log = createLogger("kv-watches-test", "silent");

describe("the rate limiter's watch of the shared counts", () => {
  it("is stopped with the limiter, also when the limiter stops while the watch is being made", async () => {
    const { kv, watches, make } = slowWatchKv();
    const running = new RateLimiter(kv, limits, log);
    const started = running.start();
    await make();
    await started;
    running.stop();
    expect(watches).toEqual({ made: 1, stopped: 1 });

    const stopping = new RateLimiter(kv, limits, log);
    const starting = stopping.start();
    stopping.stop();
    await make();
    await starting;
    expect(watches).toEqual({ made: 2, stopped: 2 });
  });
});

describe("the plugins' UI manifest watch", () => {
  it("keeps the watches of its last start only, and a stop during a start leaves none", async () => {
    const { kv, watches, make } = slowWatchKv();
    const manifest = new ManifestWatch();
    const first = manifest.start(kv);
    // Started again (NATS lost its store) before the first start's watches were made.
    const second = manifest.start(kv);
    for (let i = 0; i < 2; i++) await make();
    await Promise.all([first, second]);
    // Four made; the first start's two stopped as they came.
    expect(watches).toEqual({ made: 4, stopped: 2 });
    manifest.stop();
    expect(watches).toEqual({ made: 4, stopped: 4 });

    const starting = manifest.start(kv);
    manifest.stop();
    for (let i = 0; i < 2; i++) await make();
    await starting;
    expect(watches).toEqual({ made: 6, stopped: 6 });
  });
});
