import { describe, expect, it } from "vitest";

import { normaliseHost, normalisePath, pathHasPrefix } from "./resolution-input.js";

describe("normaliseHost", () => {
  it.each([
    ["localhost", "localhost"],
    ["LocalHost:8080", "localhost"],
    ["example.com.", "example.com"],
    ["a.example.com, proxy.internal", "a.example.com"],
    ["[::1]:8080", "[::1]"],
    ["127.0.0.1:80", "127.0.0.1"],
  ])("%s -> %s", (raw, expected) => {
    expect(normaliseHost(raw)).toBe(expected);
  });

  it.each([[""], ["   "], ["bad host"], ["evil/../x"], ["[::1"], [undefined], ["a".repeat(300)]])(
    "rejects %s",
    (raw) => {
      expect(normaliseHost(raw)).toBeNull();
    },
  );
});

describe("normalisePath", () => {
  it.each([
    [undefined, "/"],
    ["", "/"],
    ["/", "/"],
    ["/shop/", "/shop"],
    ["shop", "/shop"],
    ["//shop///cart", "/shop/cart"],
    ["\\\\evil.example/x", "/evil.example/x"],
    ["/shop/../admin", "/admin"],
    ["/a/./b?x=1#frag", "/a/b"],
    ["/x".repeat(2000), "/"],
  ])("%s -> %s", (raw, expected) => {
    expect(normalisePath(raw)).toBe(expected);
  });
});

describe("pathHasPrefix", () => {
  it("matches at segment boundaries only", () => {
    expect(pathHasPrefix("/shop", "/")).toBe(true);
    expect(pathHasPrefix("/shop", "/shop")).toBe(true);
    expect(pathHasPrefix("/shop/cart", "/shop")).toBe(true);
    expect(pathHasPrefix("/shopping", "/shop")).toBe(false);
  });
});
