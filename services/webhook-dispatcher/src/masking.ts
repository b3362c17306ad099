import { type Db, sql } from "@svc/db";

/**
 * Every property whose name is in the sensitive set, at any depth, has its value masked: longer
 * than 5 characters → first 3, `***`, last 2; otherwise `***`. Non-string values are masked through their
 * JSON text (a number or an object named `email` is still personal data).
 */
export function maskValue(value: unknown): string {
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? "");
  const chars = [...text]; // by code point, so a surrogate pair is never split
  return chars.length > 5 ? `${chars.slice(0, 3).join("")}***${chars.slice(-2).join("")}` : "***";
}

/** The set in lower case, made once per set: names are compared case-insensitively. */
const lowered = new WeakMap<ReadonlySet<string>, ReadonlySet<string>>();
function lowerCase(names: ReadonlySet<string>): ReadonlySet<string> {
  let lower = lowered.get(names);
  if (lower === undefined) {
    lower = new Set([...names].map((n) => n.toLowerCase()));
    lowered.set(names, lower);
  }
  return lower;
}

/**
 * Masks every property whose name is sensitive, at any depth. Names compare case-insensitively: `Email`
 * and `EMAIL` are the `email` field as much as `email` is.
 */
export function maskPayload(value: unknown, sensitive: ReadonlySet<string>, depth = 0): unknown {
  return maskLowered(value, lowerCase(sensitive), depth);
}

function maskLowered(value: unknown, sensitive: ReadonlySet<string>, depth: number): unknown {
  if (depth > 64) return "***"; // a pathological depth is not walked further, and not leaked either
  if (Array.isArray(value)) return value.map((v) => maskLowered(v, sensitive, depth + 1));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      // Defined, not assigned: a member named `__proto__` (JSON.parse makes one) stays a member.
      Object.defineProperty(out, key, {
        value:
          sensitive.has(key.toLowerCase()) && v !== null && v !== undefined
            ? maskValue(v)
            : maskLowered(v, sensitive, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

/** The sensitive field names (the host's and those plugins register), read at most every 5 s. */
export function sensitiveFieldNames(db: Db): () => Promise<ReadonlySet<string>> {
  let cached: { names: Set<string>; at: number } | undefined;
  return async () => {
    if (cached === undefined || Date.now() - cached.at > 5_000) {
      const rows = await db.any<{ field_name: string }>(
        sql`SELECT DISTINCT field_name FROM webhook_dispatcher.sensitive_fields`,
      );
      cached = { names: new Set(rows.map((r) => r.field_name)), at: Date.now() };
    }
    return cached.names;
  };
}
