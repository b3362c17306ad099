import { errorCatalogue, ErrorCode } from "./codes.js";

/** One violation of an input schema, as listed in a 400 problem document. */
export interface Violation {
  /** JSON pointer-ish location, e.g. `/body/eventName` or `/query/limit`. */
  readonly field: string;
  readonly message: string;
}

export interface SvcErrorOptions extends ErrorOptions {
  /** Extension members added to the problem document (must be safe to show to the caller). */
  readonly extensions?: Readonly<Record<string, unknown>>;
}

/**
 * The base of every error that is allowed to reach a caller. Its `detail` and `extensions` are shown to
 * the caller as they are, so they must never contain secrets. Anything that is not an SvcError becomes a
 * generic 500 whose detail is logged, not returned.
 */
export class SvcError extends Error {
  override readonly name: string = "SvcError";
  readonly code: ErrorCode;
  readonly extensions: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, detail: string, options: SvcErrorOptions = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.extensions = options.extensions ?? {};
  }

  get status(): number {
    return errorCatalogue[this.code].status;
  }
}

export class ValidationError extends SvcError {
  override readonly name = "ValidationError";
  readonly violations: readonly Violation[];
  constructor(violations: readonly Violation[], options: ErrorOptions = {}) {
    const detail =
      violations.length === 1
        ? `Invalid input: ${violations[0]?.field} ${violations[0]?.message}`
        : `Invalid input: ${violations.length} violations`;
    super(ErrorCode.ValidationFailed, detail, { ...options, extensions: { errors: violations } });
    this.violations = violations;
  }
}

export class UnauthenticatedError extends SvcError {
  override readonly name = "UnauthenticatedError";
  constructor(detail = "Authentication is required.", options: ErrorOptions = {}) {
    super(ErrorCode.Unauthenticated, detail, options);
  }
}

export class ForbiddenError extends SvcError {
  override readonly name = "ForbiddenError";
  constructor(missingPermission: string, options: ErrorOptions = {}) {
    super(ErrorCode.Forbidden, `The permission '${missingPermission}' is required.`, {
      ...options,
      extensions: { missingPermission },
    });
  }
}

export class NotFoundError extends SvcError {
  override readonly name = "NotFoundError";
  constructor(detail = "The resource was not found.", options: ErrorOptions = {}) {
    super(ErrorCode.NotFound, detail, options);
  }
}

export class ConflictError extends SvcError {
  override readonly name = "ConflictError";
  constructor(detail: string, options: ErrorOptions = {}) {
    super(ErrorCode.Conflict, detail, options);
  }
}

/**
 * A retry with an Idempotency-Key of a write whose reply showed a secret once (a credential, a client
 * secret): the write was done, but its reply is kept nowhere, so it is not shown again. The extensions say
 * what it answered (`doneWithStatus`, and `location` when it named one) so the client can find what it made.
 */
export class SecretShownOnceError extends SvcError {
  override readonly name = "SecretShownOnceError";
  constructor(status: number, location?: string) {
    super(
      ErrorCode.Conflict,
      `The request with this Idempotency-Key was done (${status}); its reply held a secret that is shown once and kept nowhere, so it is not shown again. Issue a new one if it was lost.`,
      {
        extensions: { rule: "secret-shown-once", doneWithStatus: status, ...(location ? { location } : {}) },
      },
    );
  }
}

export class ServiceUnavailableError extends SvcError {
  override readonly name = "ServiceUnavailableError";
  constructor(service: string, options: ErrorOptions & { operation?: string } = {}) {
    const detail =
      options.operation === undefined
        ? `The ${service} service is not available.`
        : `No replica of the ${service} service answers '${options.operation}': it is not running, or it does not provide this operation yet.`;
    super(ErrorCode.ServiceUnavailable, detail, { ...options, extensions: { service } });
  }
}

export class TimeoutError extends SvcError {
  override readonly name = "TimeoutError";
  constructor(service: string, timeoutMs: number, options: ErrorOptions = {}) {
    super(ErrorCode.Timeout, `The ${service} service did not answer within ${timeoutMs} ms.`, {
      ...options,
      extensions: { service },
    });
  }
}

export class InternalError extends SvcError {
  override readonly name = "InternalError";
  constructor(options: ErrorOptions = {}) {
    super(ErrorCode.Internal, "An unexpected error occurred.", options);
  }
}

export class RateLimitedError extends SvcError {
  override readonly name = "RateLimitedError";
  constructor(policy: string, options: ErrorOptions = {}) {
    super(ErrorCode.RateLimited, `Too many requests (policy '${policy}'); try again later.`, {
      ...options,
      extensions: { policy },
    });
  }
}

/**
 * The database connection was lost or could not be had: terminated by an administrator or a failover
 * (SQLSTATE 57P01–57P03), a connection exception (class 08), dropped under a statement, or no connection
 * within the pool's wait. Looked for along the `cause` chain.
 */
function isDatabaseUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === "object"; depth++) {
    const e = current as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof e.code === "string" && /^(57P0[123]|08[0-9A-Z]{3})$/.test(e.code)) return true;
    if (
      typeof e.message === "string" &&
      (e.message.startsWith("Connection terminated") ||
        e.message === "timeout exceeded when trying to connect" ||
        // node-postgres, for a statement on a client whose connection failed earlier (a unit of work whose
        // connection was terminated while its handler computed: found by make chaos).
        /^Client (has encountered a connection error|was closed) and is not queryable/.test(e.message))
    ) {
      return true;
    }
    current = e.cause;
  }
  return false;
}

/**
 * What an error that is no SvcError answers: a 503 naming the database when the database connection was
 * lost or could not be had (the client may retry; the outcome of a write is as unknown as after a 504),
 * else a 500 that shows nothing (`pg_terminate_backend` under load once answered 500).
 */
export function fromUnexpected(error: unknown): SvcError {
  if (error instanceof SvcError) return error;
  return isDatabaseUnavailable(error)
    ? new ServiceUnavailableError("database", { cause: error })
    : new InternalError();
}
