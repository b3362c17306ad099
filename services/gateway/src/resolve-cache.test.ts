import { afterEach, describe, expect, it, vi } from "vitest";

import { ResolveCache } from "./resolve-cache.js";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("ResolveCache", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("loads once and then answers from the cache", async () => {
    const cache = new ResolveCache(60_000, 10);
    let loads = 0;
    const load = async () => {
      loads++;
      return bytes("a");
    };
    await cache.load("k", load);
    await cache.load("k", load);
    expect(loads).toBe(1);
    expect(cache.hits).toBe(1);
  });

  it("shares one upstream load between concurrent misses", async () => {
    const cache = new ResolveCache(60_000, 10);
    let loads = 0;
    const load = () => new Promise<Uint8Array>((r) => setTimeout(() => r(bytes(String(++loads))), 10));
    const results = await Promise.all([cache.load("k", load), cache.load("k", load), cache.load("k", load)]);
    expect(loads).toBe(1);
    expect(new Set(results.map((b) => new TextDecoder().decode(b)))).toEqual(new Set(["1"]));
  });

  it("does not store an answer that was loading when the cache was invalidated", async () => {
    const cache = new ResolveCache(60_000, 10);
    let release: (v: Uint8Array) => void = () => undefined;
    const pending = cache.load("k", () => new Promise((r) => (release = r)));
    cache.invalidate();
    release(bytes("stale"));
    await pending;
    let loads = 0;
    await cache.load("k", async () => {
      loads++;
      return bytes("fresh");
    });
    expect(loads).toBe(1);
  });

  it("keeps an answer fresh for less than the TTL when asked, and never for more", async () => {
    vi.useFakeTimers();
    const cache = new ResolveCache(5_000, 10);
    let loads = 0;
    const load = async () => bytes(String(++loads));
    const short = (v: Uint8Array) => (new TextDecoder().decode(v) === "1" ? 1_000 : 60_000);
    /** The loads so far after `ms` more and one more lookup. */
    const loadsAfter = async (ms: number) => {
      vi.advanceTimersByTime(ms);
      await cache.load("k", load, short);
      return loads;
    };
    expect(await loadsAfter(0)).toBe(1);
    expect(await loadsAfter(999)).toBe(1);
    // The first answer's second is over: loaded again, and the second answer asks for more than the TTL.
    expect(await loadsAfter(2)).toBe(2);
    expect(await loadsAfter(4_999)).toBe(2);
    expect(await loadsAfter(2)).toBe(3);
  });

  it("does not cache failures", async () => {
    const cache = new ResolveCache(60_000, 10);
    await expect(cache.load("k", () => Promise.reject(new Error("down")))).rejects.toThrow("down");
    expect(new TextDecoder().decode(await cache.load("k", async () => bytes("ok")))).toBe("ok");
  });

  it("shares nothing with a TTL of 0, not even concurrent misses", async () => {
    const cache = new ResolveCache(0, 10);
    let loads = 0;
    const load = () => new Promise<Uint8Array>((r) => setTimeout(() => r(bytes(String(++loads))), 5));
    await Promise.all([cache.load("k", load), cache.load("k", load)]);
    expect(loads).toBe(2);
  });

  it("caches nothing with a TTL of 0", async () => {
    const cache = new ResolveCache(0, 10);
    let loads = 0;
    const load = async () => bytes(String(++loads));
    await cache.load("k", load);
    await cache.load("k", load);
    expect(loads).toBe(2);
  });
});
