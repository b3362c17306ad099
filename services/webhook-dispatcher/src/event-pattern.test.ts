/**
 * Event-name patterns (ADR 0014): a trailing `*` is a prefix wildcard, anything else is
 * literal, and one rule decides both delivery and `matchesKnownEvent`. The patterns accepted at create are
 * names with at most one `*`, at the end.
 */
import { SUBSCRIPTION_PATTERN } from "@svc/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { patternMatches, patternsMatching } from "./patterns.js";

describe("event-name patterns", () => {
  it("match a name exactly, or by the prefix before a trailing `*`", () => {
    expect(patternMatches("*", "user.created")).toBe(true);
    expect(patternMatches("user.*", "user.created")).toBe(true);
    expect(patternMatches("workspace.create*", "workspace.created")).toBe(true);
    expect(patternMatches("user.*", "users.created")).toBe(false);
    expect(patternMatches("user.created*", "user.created")).toBe(true);
    expect(patternMatches("user.created", "user.created")).toBe(true);
    expect(patternMatches("user.created", "user_created")).toBe(false);
    expect(patternMatches("user_*", "userXcreated")).toBe(false);
  });

  it("agree with the prefix rule on generated patterns and names", () => {
    const text = fc.constantFrom("a", "b", ".", "-", "_");
    fc.assert(
      fc.property(
        fc.string({ unit: text, maxLength: 10 }),
        fc.boolean(),
        fc.string({ unit: text, maxLength: 12 }),
        (p, star, n) => {
          const pattern = star ? `${p}*` : p;
          expect(patternMatches(pattern, n)).toBe(star ? n.startsWith(p) : p === n);
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it("lists each name's patterns: itself, `*`, and every prefix with `*`", () => {
    expect(patternsMatching("a.b")).toEqual(["a.b", "*", "a*", "a.*", "a.b*"]);
  });

  it("accepts a `*` only at the end of a subscription's or flow's event name", () => {
    const accepted = new RegExp(SUBSCRIPTION_PATTERN, "u");
    for (const ok of ["*", "workspace.*", "workspace.create*", "user.created", "a".repeat(120)]) {
      expect(accepted.test(ok), ok).toBe(true);
    }
    for (const refused of ["", "*.created", "u*r.c*d", "a**", "a".repeat(121), `${"a".repeat(120)}*`]) {
      expect(accepted.test(refused), refused).toBe(false);
    }
  });
});
