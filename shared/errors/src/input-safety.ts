/**
 * Input that cannot be stored or forwarded safely, whatever its schema says: a NUL character or an unpaired
 * UTF-16 surrogate in a string or a property name (PostgreSQL text and jsonb cannot hold them: NUL is
 * refused, a lone surrogate is refused by jsonb and silently replaced in text) and JSON nested deeper than MAX_DEPTH (it
 * would overflow the stack of validators and encoders). The gateway refuses such requests at the edge;
 * consumers of the bus drop such messages.
 */
import type { Violation } from "./errors.js";

/** In Unicode mode a paired surrogate is one code point, so this matches only unpaired ones. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Deepest JSON the API accepts; no body of the API is deeper than a handful of levels. */
export const MAX_DEPTH = 32;

/**
 * The first NUL or over-deep value in `value`, walked without recursion (a hostile body can be deeper than
 * the stack). Keys are checked like values.
 */
export function findUnsafeInput(value: unknown, root: string): Violation | undefined {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value, path: root, depth: 0 }];
  while (stack.length > 0) {
    const item = stack.pop() as { value: unknown; path: string; depth: number };
    if (typeof item.value === "string") {
      if (item.value.includes("\u0000")) return { field: item.path, message: "must not contain NUL" };
      if (LONE_SURROGATE.test(item.value)) {
        return { field: item.path, message: "must be valid Unicode (it has an unpaired surrogate)" };
      }
      continue;
    }
    if (typeof item.value !== "object" || item.value === null) continue;
    // Raw bytes (an uploaded archive) are no JSON input: nothing in them is stored or forwarded as text.
    if (ArrayBuffer.isView(item.value)) continue;
    if (item.depth >= MAX_DEPTH) {
      return { field: item.path, message: `is nested deeper than ${MAX_DEPTH} levels` };
    }
    const entries = Array.isArray(item.value)
      ? item.value.map((v, i) => [String(i), v] as const)
      : Object.entries(item.value);
    for (const [key, child] of entries) {
      const path = `${item.path}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`;
      if (key.includes("\u0000") || LONE_SURROGATE.test(key)) {
        return { field: item.path, message: "has a property name containing NUL or an unpaired surrogate" };
      }
      stack.push({ value: child, path, depth: item.depth + 1 });
    }
  }
  return undefined;
}
