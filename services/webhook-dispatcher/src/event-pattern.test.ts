/**
 * Issue 34, item 2: event-name patterns (`*` only) match without backtracking. The same answers as the
 * regular expression they replace (`*` → `.*`), on generated patterns and names; and a pattern of 119 `*`
 * against a name it does not match answers at once (the regular expression took seconds for twelve).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { patternMatches } from "./subscriptions.js";

function viaRegExp(pattern: string, name: string): boolean {
  const source = pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\-]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${source}$`, "s").test(name);
}

describe("event-name patterns", () => {
  it("match as `*` → any run of characters, everything else literally", () => {
    expect(patternMatches("*", "user.created")).toBe(true);
    expect(patternMatches("user.*", "user.created")).toBe(true);
    expect(patternMatches("user.*", "users.created")).toBe(false);
    expect(patternMatches("*.created", "user.created")).toBe(true);
    expect(patternMatches("u*r.c*d", "user.created")).toBe(true);
    expect(patternMatches("a*a", "a")).toBe(false);
    expect(patternMatches("a**a", "aa")).toBe(true);
    expect(patternMatches("user.created", "user.created")).toBe(true);
    expect(patternMatches("user.created", "user_created")).toBe(false);
  });

  it("agree with the regular expression on generated patterns and names", () => {
    const alphabet = fc.constantFrom("a", "b", ".", "*", "-");
    const text = fc.constantFrom("a", "b", ".", "-");
    fc.assert(
      fc.property(
        fc.string({ unit: alphabet, maxLength: 12 }),
        fc.string({ unit: text, maxLength: 14 }),
        (p, n) => {
          expect(patternMatches(p, n)).toBe(viaRegExp(p, n));
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it("answer a pattern of 119 `*` at once, for a name that does not match", () => {
    const pattern = `${"*".repeat(119)}Q`;
    const names = Array.from({ length: 500 }, (_, i) => `platform.event-number-${i}.${"x".repeat(60)}`);
    const started = process.hrtime.bigint();
    expect(names.some((name) => patternMatches(pattern, name))).toBe(false);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Generous: the regular expression needed seconds per name with twelve `*`.
    expect(ms).toBeLessThan(500);
  });
});
