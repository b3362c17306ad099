import { ValidationError } from "@svc/errors";

import { isUuid } from "./uuid.js";

/**
 * Paging cursors: opaque to callers, strictly checked when they come back. A cursor is the base64url of a
 * JSON array `[tag, ...values]`; `tag` names the listing it belongs to, and each value is checked against
 * the kind the listing declares (text without control characters, UUID, timestamp inside PostgreSQL's
 * range, bigint inside int8), so that nothing a caller makes up reaches a query as anything but a
 * well-formed value. A cursor that fails any check is `null`: the caller answers 400 naming the field.
 */

export type CursorFieldKind = "text" | "uuid" | "timestamp" | "bigint";

const MAX_CURSOR_LENGTH = 1_024;
const MAX_TEXT = 256;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const BIGINT = /^(0|[1-9]\d{0,18})$/;
const INT8_MAX = 9_223_372_036_854_775_807n;
// No C0/C1 controls (NUL above all) in text values.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

function valid(kind: CursorFieldKind, value: unknown): value is string {
  if (typeof value !== "string") return false;
  switch (kind) {
    case "text":
      return value.length <= MAX_TEXT && !CONTROL.test(value);
    case "uuid":
      return isUuid(value);
    case "bigint":
      return BIGINT.test(value) && BigInt(value) <= INT8_MAX;
    case "timestamp": {
      if (!ISO_UTC.test(value)) return false;
      const at = Date.parse(value);
      // Inside what a timestamptz column holds and what Date round-trips.
      return Number.isFinite(at) && new Date(at).toISOString().slice(0, 19) === value.slice(0, 19);
    }
  }
}

export function encodeCursor(tag: string, values: readonly string[]): string {
  return Buffer.from(JSON.stringify([tag, ...values]), "utf8").toString("base64url");
}

/** The cursor's values when it is one this listing issued (same tag, each value of its kind), else null. */
export function decodeCursor(
  cursor: unknown,
  tag: string,
  kinds: readonly CursorFieldKind[],
): string[] | null {
  if (typeof cursor !== "string" || cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH) return null;
  if (!BASE64URL.test(cursor)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (!Array.isArray(parsed) || parsed.length !== kinds.length + 1 || parsed[0] !== tag) return null;
  const values = parsed.slice(1);
  return kinds.every((kind, i) => valid(kind, values[i])) ? (values as string[]) : null;
}

/** A keyset listing: its cursor tag and the kinds of the values its cursor carries. */
export interface Listing {
  readonly tag: string;
  readonly kinds: readonly CursorFieldKind[];
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

/**
 * The page a list query asks for: `limit` (default 50, 1–100) and the values of the cursor a previous
 * page of the same listing issued (null for the first page). 400 naming the field otherwise.
 */
export function readPage(
  query: { readonly limit?: number; readonly cursor?: string },
  listing: Listing,
): { limit: number; after: string[] | null } {
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    throw new ValidationError([
      { field: "/query/limit", message: `must be an integer from 1 to ${MAX_PAGE_SIZE}` },
    ]);
  }
  if (query.cursor === undefined) return { limit, after: null };
  const after = decodeCursor(query.cursor, listing.tag, listing.kinds);
  if (after === null) {
    throw new ValidationError([{ field: "/query/cursor", message: "is not a cursor this API issued" }]);
  }
  return { limit, after };
}

/**
 * One page from rows fetched with LIMIT limit + 1: the first `limit`, and a cursor after the last of them
 * when the extra row shows that another page exists.
 */
export function toPage<Row, Item = Row>(
  rows: readonly Row[],
  limit: number,
  listing: Listing,
  cursorOf: (last: Row) => readonly string[],
  view: (row: Row) => Item = (row) => row as unknown as Item,
): { items: Item[]; nextCursor: string | null } {
  const last = rows[limit - 1];
  return {
    items: rows.slice(0, limit).map(view),
    nextCursor: rows.length > limit && last !== undefined ? encodeCursor(listing.tag, cursorOf(last)) : null,
  };
}
