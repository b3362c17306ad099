import { describe, expect, it } from "vitest";

import { Observers } from "./observers.js";

describe("observers", () => {
  it("are added, told in order, removed one by one, and one that throws does not stop the others", () => {
    const seen: string[] = [];
    const observers = new Observers<[string]>();
    expect(observers.empty).toBe(true);
    const removeA = observers.add((v) => seen.push(`a:${v}`));
    observers.add(() => {
      throw new Error("broken observer");
    });
    const removeC = observers.add((v) => seen.push(`c:${v}`));
    expect(observers.empty).toBe(false);
    observers.notify("1");
    removeA();
    observers.notify("2");
    removeC();
    observers.notify("3");
    expect(seen).toEqual(["a:1", "c:1", "c:2"]);
  });
});
