/** What route and message contracts share: the violations a schema check lists, and when replies are checked. */
import type { TSchema } from "@sinclair/typebox";
import type { TypeCheck } from "@sinclair/typebox/compiler";
import type { Violation } from "@svc/errors";

/** A failed check's violations, at most 20. */
export function violations(check: TypeCheck<TSchema>, value: unknown): Violation[] {
  const out: Violation[] = [];
  for (const error of check.Errors(value)) {
    out.push({ field: error.path || "/", message: error.message });
    if (out.length >= 20) break;
  }
  return out;
}

/** Replies are checked where a mismatch should fail loudly: development, tests, or when asked to. */
export const checkReplies =
  process.env.SVC_CHECK_REPLIES === "true" ||
  (process.env.SVC_CHECK_REPLIES !== "false" &&
    (process.env.NODE_ENV === "development" || process.env.NODE_ENV === "test"));
