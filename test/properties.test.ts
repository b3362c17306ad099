/**
 * Property-based tests (fast-check) of what the fuzz harness cannot see from outside: masking, event-name
 * validation and matching, and the normalisation of resolution input. Cursor round trips are in
 * shared/db/src/cursor.test.ts.
 */
import { MAX_PATH_LENGTH, normaliseHost, normalisePath, pathHasPrefix } from "@svc/workspace";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { maskPayload, maskValue } from "../services/webhook-dispatcher/src/masking.js";
import { patternMatches } from "../services/webhook-dispatcher/src/patterns.js";
import { EVENT_PATTERN } from "../services/webhook-dispatcher/src/subscriptions.js";

const SENSITIVE = new Set([
  "email",
  "displayName",
  "target",
  "targetValue",
  "targetDisplayName",
  "phoneNumber",
]);
const codePoints = (s: string) => [...s];

describe("masking", () => {
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

  it("is idempotent: masking a masked value or payload changes nothing", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "grapheme", maxLength: 40 }), fc.jsonValue()), (value) => {
        expect(maskValue(maskValue(value))).toBe(maskValue(value));
      }),
    );
    fc.assert(
      fc.property(
        fc.jsonValue().map((v) => ({ email: v, nested: [{ displayName: v, other: v }] })),
        (payload) => {
          const once = maskPayload(payload, SENSITIVE);
          expect(maskPayload(once, SENSITIVE)).toEqual(once);
        },
      ),
    );
  });

  it("leaves its input as it was", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ maxLength: 20 }), (value, email) => {
        const payload = { email, value, list: [{ phoneNumber: email, value }] };
        const before = JSON.stringify(payload);
        maskPayload(payload, SENSITIVE);
        expect(JSON.stringify(payload)).toBe(before);
      }),
    );
  });

  it("never lets a sensitive value through, however deep it is nested", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 200 }),
        fc.string({ minLength: 8, maxLength: 30 }).filter((s) => !s.includes("***")),
        (depth, secret) => {
          let payload: unknown = { email: secret, targetValue: { inner: secret } };
          for (let i = 0; i < depth; i++) payload = i % 2 === 0 ? [payload] : { level: payload };
          expect(JSON.stringify(maskPayload(payload, SENSITIVE))).not.toContain(
            JSON.stringify(secret).slice(1, -1),
          );
        },
      ),
    );
  });

  it("masks only names in the sensitive set, in any case, never a name that merely contains one", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("emailAddress", "my_email", "display_name", "target_value", "phone"),
        fc.string({ minLength: 6, maxLength: 20 }),
        (name, value) => {
          expect(maskPayload({ [name]: value }, SENSITIVE)).toEqual({ [name]: value });
        },
      ),
    );
    // A sensitive name in another case is the same field.
    fc.assert(
      fc.property(
        fc.constantFrom("Email", "EMAIL", "eMail", "targetvalue", "DisplayName"),
        fc.string({ minLength: 6, maxLength: 20 }),
        (name, value) => {
          expect(maskPayload({ [name]: value }, SENSITIVE)).toEqual({ [name]: maskValue(value) });
        },
      ),
    );
  });
});

describe("event names", () => {
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

  it("accepts only names of 1 to 120 word characters, dots and dashes, with at most one * at the end", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 130 }), (candidate) => {
        const expected =
          candidate.length >= 1 && candidate.length <= 120 && /^[A-Za-z0-9_.-]*\*?$/.test(candidate);
        expect(EVENT_PATTERN.test(candidate)).toBe(expected);
      }),
    );
    fc.assert(
      fc.property(name, (n) => {
        expect(EVENT_PATTERN.test(n)).toBe(true);
      }),
    );
  });

  /** A reference glob matcher: `*` matches any run of characters (none included); all else is literal. */
  function globModel(pattern: string, name: string): boolean {
    const p = [...pattern];
    const n = [...name];
    let row = Array<boolean>(n.length + 1).fill(false);
    row[0] = true;
    for (const c of p) {
      const next = Array<boolean>(n.length + 1).fill(false);
      for (let j = 0; j <= n.length; j++) {
        if (c === "*") next[j] = (row[j] ?? false) || (j > 0 && (next[j - 1] ?? false));
        else next[j] = j > 0 && (row[j - 1] ?? false) && n[j - 1] === c;
      }
      row = next;
    }
    return row[n.length] ?? false;
  }

  it("matches exactly as a glob whose only * ends it (ADR 0014), over names the API accepts", () => {
    const alphabet = fc.constantFrom("a", "b", ".", "-", "_", "1");
    const base = fc.array(alphabet, { maxLength: 10 }).map((a) => a.join(""));
    const name = fc.array(alphabet, { minLength: 1, maxLength: 12 }).map((a) => a.join(""));
    fc.assert(
      fc.property(base, fc.boolean(), name, (b, star, n) => {
        const p = star ? `${b}*` : b;
        fc.pre(p.length > 0);
        expect(EVENT_PATTERN.test(p)).toBe(true);
        expect(patternMatches(p, n)).toBe(globModel(p, n));
      }),
      { numRuns: 2_000 },
    );
  });

  it("treats regex metacharacters, non-ASCII and astral characters literally before a trailing *", () => {
    // Line terminators (\n, \r, U+2028, U+2029) are left out: event names cannot hold them (EVENT_PATTERN).
    const text = fc
      .string({ unit: "binary", maxLength: 12 })
      .map((s) => s.replace(/[\n\r\u2028\u2029*]/g, ""));
    const meta = fc.constantFrom(".", "+", "?", "^", "$", "{", "}", "(", ")", "|", "[", "]", "\\", "-", "/");
    const piece = fc.oneof(text, meta);
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 4 }), fc.array(piece, { maxLength: 4 }), (left, right) => {
        const pattern = `${left.join("")}*`;
        for (const candidate of [left.join(""), `${left.join("")}xyz${right.join("")}`])
          expect(patternMatches(pattern, candidate)).toBe(true);
        const other = `Z${left.join("")}${right.join("")}`;
        expect(patternMatches(pattern, other)).toBe(globModel(pattern, other));
      }),
    );
  });
});

describe("fuzz findings, as examples", () => {
  it("keeps a member named __proto__ (JSON.parse makes one) and masks inside it", () => {
    const payload = JSON.parse('{"__proto__":{"email":"someone@example.com"},"a":1}') as object;
    const masked = maskPayload(payload, SENSITIVE);
    expect(JSON.stringify(masked)).toBe('{"__proto__":{"email":"som***om"},"a":1}');
    expect(Object.getPrototypeOf(masked)).toBe(Object.prototype);
  });

  it("lets * match line terminators too", () => {
    expect(patternMatches("*", "a\nb")).toBe(true);
    expect(patternMatches("a.*", "a.\u2028")).toBe(true);
  });

  it("resolves dot segments after a segment that starts with a dot", () => {
    expect(normalisePath("/shop/.x/../../other")).toBe("/other");
    expect(normalisePath("/a/.well-known/./b/..")).toBe("/a/.well-known");
    expect(normalisePath("/a/.x/%2E%2e/b")).toBe("/a/b");
  });

  it("treats a path that %-encodes beyond the limit as unusable (/)", () => {
    expect(normalisePath(`/${"é".repeat(1_000)}`)).toBe("/");
    expect(normalisePath(`/${"é".repeat(300)}`)).toBe(`/${"%C3%A9".repeat(300)}`);
  });
});

describe("resolution input", () => {
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
  it("takes the first entry of a forwarded host list, trimmed", () => {
    fc.assert(
      fc.property(fc.domain(), fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }), (first, rest) => {
        expect(normaliseHost([` ${first.toUpperCase()} `, ...rest].join(","))).toBe(first.toLowerCase());
      }),
    );
  });

  it("refuses hosts that are no host names, whatever the input", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (raw) => {
        const host = normaliseHost(raw);
        if (host === null) return;
        expect(host.length).toBeGreaterThan(0);
        expect(host.length).toBeLessThanOrEqual(253);
        expect(host).toMatch(/^(\[[0-9a-f:.]+\]|[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?)$/);
      }),
    );
  });

  it("never keeps a dot segment, a query, a fragment or a doubled slash, for any input", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: "binary", maxLength: 60 }),
          fc
            .array(fc.constantFrom("a", "/", ".", "..", "%2e", "%2E", "\\", "?", "#", "%", " ", "\t", "é"), {
              maxLength: 20,
            })
            .map((a) => a.join("")),
        ),
        (raw) => {
          const path = normalisePath(raw);
          expect(path.startsWith("/")).toBe(true);
          expect(path).not.toMatch(/[?#\s]|\/\/|(^|\/)(\.|%2e){1,2}(\/|$)/i);
          if (path !== "/") expect(path.endsWith("/")).toBe(false);
        },
      ),
    );
  });

  it("is stable for any input whose normalised form is within the path limit", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 80 }), (raw) => {
        const once = normalisePath(raw);
        fc.pre(once.length <= MAX_PATH_LENGTH);
        expect(normalisePath(once)).toBe(once);
      }),
    );
  });
});
