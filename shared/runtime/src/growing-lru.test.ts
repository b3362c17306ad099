import { describe, expect, it } from "vitest";

import { growingLru } from "./growing-lru.js";

describe("growingLru", () => {
  it("holds at most its bound, evicting the least recently used", () => {
    const cache = growingLru<string, number>(3);
    for (const [i, key] of ["a", "b", "c"].entries()) cache.set(key, i);
    expect(cache.get("a")).toBe(0); // a is now the most recently used
    cache.set("d", 3);
    expect(cache.size).toBe(3);
    expect(cache.has("b")).toBe(false);
    expect([...cache.keys()].sort()).toEqual(["a", "c", "d"]);
    for (let i = 0; i < 1_000; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBe(3);
    expect([...cache.keys()].sort()).toEqual(["k997", "k998", "k999"]);
  });

  it("keeps the options it is given besides the bound (a time to live)", async () => {
    const cache = growingLru<string, number>(10, { ttl: 20 });
    cache.set("a", 1);
    expect(cache.get("a")).toBe(1);
    await new Promise((r) => setTimeout(r, 40));
    expect(cache.get("a")).toBeUndefined();
  });
});
