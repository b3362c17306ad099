/**
 * Issue 8, point 12: property-based tests (fast-check) of what the fuzz harness cannot see from outside:
 * masking (spec 6.4), event-name validation and matching (2.3, 6.2), and the normalisation of resolution
 * input (2.1.1). Cursor round trips are in shared/db/src/cursor.test.ts.
 */
import { normaliseHost, normalisePath, pathHasPrefix } from "@svc/workspace";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { maskPayload, maskValue } from "../services/webhook-dispatcher/src/masking.js";
import { EVENT_PATTERN, patternMatches } from "../services/webhook-dispatcher/src/subscriptions.js";

const SENSITIVE = new Set([
  "email",
  "displayName",
  "target",
  "targetValue",
  "targetDisplayName",
  "phoneNumber",
]);
const codePoints = (s: string) => [...s];

describe("masking (spec 6.4)", () => {
  it("keeps the first 3 and last 2 characters of a value longer than 5, else ***", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 60 }), (value) => {
        const masked = maskValue(value);
        const chars = codePoints(value);
        if (chars.length > 5) {
          expect(masked).toBe(`${chars.slice(0, 3).join("")}***${chars.slice(-2).join("")}`);
        } else {
          expect(masked).toBe("***");
        }
      }),
    );
  });

  it("never leaves a sensitive value whole, at any depth, and leaves everything else untouched", () => {
    const key = fc.oneof(fc.constantFrom(...SENSITIVE), fc.string({ maxLength: 8 }));
    const payload = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        fc.string({ maxLength: 20 }),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie("node"), { maxLength: 4 }),
        fc.dictionary(key, tie("node"), { maxKeys: 5 }),
      ),
    })).node;
    fc.assert(
      fc.property(payload, (value) => {
        const masked = maskPayload(value, SENSITIVE);
        const walk = (original: unknown, out: unknown): void => {
          if (Array.isArray(original)) {
            expect(Array.isArray(out)).toBe(true);
            original.forEach((v, i) => walk(v, (out as unknown[])[i]));
          } else if (original !== null && typeof original === "object") {
            expect(Object.keys(out as object).sort()).toEqual(Object.keys(original).sort());
            for (const [k, v] of Object.entries(original)) {
              const o = (out as Record<string, unknown>)[k];
              if (SENSITIVE.has(k) && v !== null) {
                expect(typeof o).toBe("string");
                expect(o).toContain("***");
                expect(o).toBe(maskValue(v));
              } else walk(v, o);
            }
          } else {
            expect(out).toEqual(original);
          }
        };
        walk(value, masked);
      }),
    );
  });

  it("is deterministic: masking the same payload twice gives the same result", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(maskPayload(value, SENSITIVE)).toEqual(maskPayload(value, SENSITIVE));
      }),
    );
  });
});

describe("event names (spec 2.3, 6.2)", () => {
  const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){1,3}$/);

  it("a name without * matches exactly itself", () => {
    fc.assert(
      fc.property(name, name, (a, b) => {
        expect(patternMatches(a, a)).toBe(true);
        expect(patternMatches(a, b)).toBe(a === b);
      }),
    );
  });

  it("treats every character but * literally, regex metacharacters included", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }), (a, b) => {
        fc.pre(!a.includes("*"));
        expect(patternMatches(a, b)).toBe(a === b);
      }),
    );
    expect(patternMatches("user.created", "userXcreated")).toBe(false);
    expect(patternMatches("a+b", "aab")).toBe(false);
  });

  it("* matches any run of characters, dots included", () => {
    fc.assert(
      fc.property(name, fc.string({ maxLength: 15 }), (prefix, rest) => {
        const [head] = prefix.split(".");
        expect(patternMatches(`${head}.*`, `${head}.${rest}`)).toBe(true);
        expect(patternMatches("*", `${prefix}${rest}`)).toBe(true);
      }),
    );
  });

  it("accepts only names of 1 to 120 word characters, dots, dashes and *", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 130 }), (candidate) => {
        const expected =
          candidate.length >= 1 && candidate.length <= 120 && /^[A-Za-z0-9_.\-*]+$/.test(candidate);
        expect(EVENT_PATTERN.test(candidate)).toBe(expected);
      }),
    );
    fc.assert(
      fc.property(name, (n) => {
        expect(EVENT_PATTERN.test(n)).toBe(true);
      }),
    );
  });
});

describe("resolution input (spec 2.1.1)", () => {
  it("normalising a host twice changes nothing, and the result is lower case without port or trailing dot", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.domain(), fc.string({ maxLength: 40 })),
        fc.option(fc.nat(65_535)),
        (host, port) => {
          const raw = port === null ? host : `${host}:${port}`;
          const once = normaliseHost(raw);
          if (once === null) return;
          expect(normaliseHost(once)).toBe(once);
          expect(once).toBe(once.toLowerCase());
          expect(once.endsWith(".")).toBe(false);
          if (!once.startsWith("[")) expect(once).not.toContain(":");
        },
      ),
    );
  });

  it("accepts every real domain name, whatever its case, port and trailing dot", () => {
    fc.assert(
      fc.property(fc.domain(), fc.nat(65_535), fc.boolean(), (domain, port, dot) => {
        const upper = domain.toUpperCase();
        expect(normaliseHost(`${upper}${dot ? "." : ""}:${port}`)).toBe(domain.toLowerCase());
      }),
    );
  });

  it("normalised paths start with /, have no empty, . or .. segment and no trailing slash, and are stable", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.constantFrom("", ".", "..", "a", "B", "%41", "x y", "?q", "#f"),
            fc.string({ maxLength: 6 }),
          ),
          {
            maxLength: 8,
          },
        ),
        (segments) => {
          const path = normalisePath(segments.join("/"));
          expect(path.startsWith("/")).toBe(true);
          expect(normalisePath(path)).toBe(path);
          if (path !== "/") {
            expect(path.endsWith("/")).toBe(false);
            for (const segment of path.slice(1).split("/")) expect(["", ".", ".."]).not.toContain(segment);
          }
          expect(path).not.toMatch(/[?#]/);
        },
      ),
    );
  });

  it("a prefix covers a path only at a segment boundary", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^(\/[a-z]{1,4}){1,3}$/),
        fc.stringMatching(/^[a-z]{1,4}$/),
        (prefix, more) => {
          expect(pathHasPrefix(prefix, prefix)).toBe(true);
          expect(pathHasPrefix(`${prefix}/${more}`, prefix)).toBe(true);
          expect(pathHasPrefix(`${prefix}${more}`, prefix)).toBe(false);
          expect(pathHasPrefix(`${prefix}/${more}`, "/")).toBe(true);
        },
      ),
    );
  });
});
