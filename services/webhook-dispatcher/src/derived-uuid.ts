import { createHash } from "node:crypto";

/**
 * A UUID (version 5 layout) derived from `key`: the same key always gives the same id, so something done
 * again (a flow step after a crash, an announcement repeated) repeats its event id and is dropped as a
 * duplicate.
 */
export function derivedUuid(key: string): string {
  const h = createHash("sha256").update(key).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
}
