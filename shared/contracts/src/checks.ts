/**
 * What route and message contracts share: a schema's checker compiled on first use, the violations it
 * lists, the check of a request (a ValidationError) and of a reply (an InternalError), and when replies
 * are checked.
 */
import type { TSchema } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { InternalError, ValidationError, type Violation } from "@svc/errors";

import { registerFormats } from "./formats.js";

/** A failed check's violations, at most 20. */
function violations(check: TypeCheck<TSchema>, value: unknown): Violation[] {
  const out: Violation[] = [];
  for (const error of check.Errors(value)) {
    out.push({ field: error.path || "/", message: error.message });
    if (out.length >= 20) break;
  }
  return out;
}

/** A check of `schema`, compiled on first use (most processes never serve most subjects): the violations, or null. */
export type Checker = (value: unknown) => Violation[] | null;

export function checker(schema: TSchema): Checker {
  let compiled: TypeCheck<TSchema> | undefined;
  return (value) => {
    registerFormats();
    compiled ??= TypeCompiler.Compile(schema);
    return compiled.Check(value) ? null : violations(compiled, value);
  };
}

/** A received request that breaks its schema is a ValidationError listing each violation. */
export function requireValid(check: Checker, value: unknown): void {
  const found = check(value);
  if (found !== null) throw new ValidationError(found);
}

/**
 * A reply that breaks its schema, as the caller will see it (dates become strings, undefined members
 * vanish), is an InternalError naming the subject and each violation.
 */
export function requireValidReply(check: Checker, subject: string, reply: unknown): void {
  const wire: unknown = reply === undefined ? null : JSON.parse(JSON.stringify(reply));
  const found = check(wire);
  if (found === null) return;
  const text = found.map((v) => `${v.field} ${v.message}`).join("; ");
  throw new InternalError({ cause: new Error(`${subject}: the reply breaks its contract: ${text}`) });
}

/** Replies are checked where a mismatch should fail loudly: development, tests, or when asked to. */
export const checkReplies =
  process.env.SVC_CHECK_REPLIES === "true" ||
  (process.env.SVC_CHECK_REPLIES !== "false" &&
    (process.env.NODE_ENV === "development" || process.env.NODE_ENV === "test"));
