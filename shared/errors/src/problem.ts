import { errorCatalogue, ErrorCode, isErrorCode } from "./codes.js";
import { InternalError, SvcError } from "./errors.js";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** An RFC 9457 problem document, with our stable `code` extension. */
export interface ProblemDocument {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: ErrorCode;
  readonly instance?: string;
  readonly [extension: string]: unknown;
}

const RESERVED = new Set(["type", "title", "status", "detail", "code", "instance"]);

/**
 * Turns any thrown value into a problem document. Only SvcError details reach the caller; every other
 * error becomes the generic 500 (the caller logs the original).
 */
export function toProblem(error: unknown, problemsBaseUrl: string, instance?: string): ProblemDocument {
  const svcError = error instanceof SvcError ? error : new InternalError({ cause: error });
  const entry = errorCatalogue[svcError.code];
  const problem: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(svcError.extensions)) {
    if (!RESERVED.has(key)) problem[key] = value;
  }
  return {
    type: `${problemsBaseUrl.replace(/\/+$/, "")}/${entry.slug}`,
    title: entry.title,
    status: entry.status,
    detail: svcError.message,
    code: svcError.code,
    ...(instance === undefined ? {} : { instance }),
    ...problem,
  };
}

/**
 * Rebuilds an SvcError from the code and problem that crossed the wire, so that a caller can rethrow a
 * downstream failure unchanged. An unknown code becomes an internal error.
 */
export function fromWire(code: string, body: unknown): SvcError {
  if (!isErrorCode(code)) return new InternalError({ cause: new Error(`unknown error code ${code}`) });
  const problem = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const detail = typeof problem.detail === "string" ? problem.detail : errorCatalogue[code].title;
  const extensions: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(problem)) {
    if (!RESERVED.has(key) && key !== "code") extensions[key] = value;
  }
  return new SvcError(code, detail, { extensions });
}

export { ErrorCode };
