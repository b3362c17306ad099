import { describe, expect, it } from "vitest";

import { findUnsafeInput } from "./input-safety.js";

describe("findUnsafeInput", () => {
  it("finds NUL, unpaired surrogates and excessive depth in JSON input, naming the field", () => {
    expect(findUnsafeInput({ a: ["ok", "x\u0000"] }, "/body")).toEqual({
      field: "/body/a/1",
      message: "must not contain NUL",
    });
    expect(findUnsafeInput({ name: "\ud800" }, "/body")?.field).toBe("/body/name");
    let deep: unknown = "leaf";
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(findUnsafeInput(deep, "/body")?.message).toMatch(/nested deeper/);
    expect(findUnsafeInput({ fine: [1, "two", { three: null }] }, "/body")).toBeUndefined();
  });

  it("passes raw bytes (an uploaded archive) over without walking them, whatever they hold", () => {
    const bytes = Buffer.alloc(1024, 0);
    // A member that the walk would report if it went into the bytes.
    Object.defineProperty(bytes, "probe", { value: "x\u0000", enumerable: true });
    expect(findUnsafeInput(bytes, "/body")).toBeUndefined();
    expect(findUnsafeInput({ file: bytes }, "/body")).toBeUndefined();
    const plain = { probe: "x\u0000" };
    expect(findUnsafeInput(plain, "/body")?.field).toBe("/body/probe");
  });
});
