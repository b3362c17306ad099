import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { type CursorFieldKind, decodeCursor, encodeCursor } from "./cursor.js";

// Control characters are what the text kind refuses.
// eslint-disable-next-line no-control-regex
const text = fc.string({ maxLength: 256 }).filter((s) => !/[\u0000-\u001f\u007f-\u009f]/.test(s));
const uuid = fc.uuid();
const bigint = fc.bigInt({ min: 0n, max: 9_223_372_036_854_775_807n }).map(String);
const timestamp = fc
  .date({ min: new Date("1970-01-01T00:00:00Z"), max: new Date("9999-12-31T23:59:59Z"), noInvalidDate: true })
  .chain((d) =>
    fc
      .integer({ min: 0, max: 999 })
      .map((us) => d.toISOString().replace("Z", `${String(us).padStart(3, "0")}Z`)),
  );
const byKind: Record<CursorFieldKind, fc.Arbitrary<string>> = { text, uuid, bigint, timestamp };
const kinds = fc.array(fc.constantFrom<CursorFieldKind>("text", "uuid", "bigint", "timestamp"), {
  minLength: 1,
  maxLength: 3,
});

describe("paging cursors", () => {
  it("round-trips every well-formed value of every kind", () => {
    fc.assert(
      fc.property(
        kinds.chain((ks) => fc.tuple(fc.constant(ks), fc.tuple(...ks.map((k) => byKind[k])))),
        ([ks, values]) => {
          expect(decodeCursor(encodeCursor("list", values), "list", ks)).toEqual(values);
        },
      ),
    );
  });

  it("refuses a cursor of another listing", () => {
    fc.assert(
      fc.property(uuid, (id) => {
        expect(decodeCursor(encodeCursor("users", [id]), "webhooks", ["uuid"])).toBeNull();
      }),
    );
  });

  it("never accepts arbitrary strings as anything but a well-formed cursor", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 2_000 }), kinds, (cursor, ks) => {
        const values = decodeCursor(cursor, "list", ks);
        // Whatever a caller makes up either fails, or decodes to values that each pass their check.
        if (values !== null) expect(decodeCursor(encodeCursor("list", values), "list", ks)).toEqual(values);
      }),
    );
  });

  it("refuses NUL, out-of-range ids and dates, and wrong shapes", () => {
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    expect(decodeCursor(b64(["users", "a\u0000"]), "users", ["text"])).toBeNull();
    expect(decodeCursor(b64(["jobs", "9223372036854775808"]), "jobs", ["bigint"])).toBeNull();
    expect(decodeCursor(b64(["jobs", "99999999999999999999"]), "jobs", ["bigint"])).toBeNull();
    expect(decodeCursor(b64(["jobs", "-1"]), "jobs", ["bigint"])).toBeNull();
    expect(decodeCursor(b64(["jobs", 5]), "jobs", ["bigint"])).toBeNull();
    expect(decodeCursor(b64(["w", "2026-02-30T00:00:00.000Z"]), "w", ["timestamp"])).toBeNull();
    expect(decodeCursor(b64(["w", "+275760-09-13T00:00:00.000Z"]), "w", ["timestamp"])).toBeNull();
    expect(decodeCursor(b64(["w", "not-a-uuid"]), "w", ["uuid"])).toBeNull();
    expect(decodeCursor(b64({ at: "x" }), "w", ["text"])).toBeNull();
    expect(decodeCursor(b64(["w", "a", "b"]), "w", ["text"])).toBeNull();
    expect(decodeCursor("not base64!", "w", ["text"])).toBeNull();
    expect(decodeCursor("a".repeat(2_000), "w", ["text"])).toBeNull();
  });
});
