import pRetry from "p-retry";

/**
 * SQLSTATEs after which the same statement may succeed when run again: serialization failure, deadlock,
 * the server starting up, and the connection-exception class (08xxx).
 */
const RETRYABLE_SQLSTATES = new Set(["40001", "40P01", "57P03", "08000", "08003", "08006", "08001", "08004"]);
const RETRYABLE_NODE_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT"]);

/** Walks the cause chain (wrapped driver errors) looking for a retryable code. */
export function isRetryableDbError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === "object"; depth++) {
    const e = current as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof e.code === "string" && (RETRYABLE_SQLSTATES.has(e.code) || RETRYABLE_NODE_CODES.has(e.code))) {
      return true;
    }
    if (typeof e.message === "string" && e.message.startsWith("Connection terminated")) return true;
    current = e.cause;
  }
  return false;
}

export interface RetryOptions {
  /** Attempts after the first one. */
  readonly retries?: number;
  readonly minTimeoutMs?: number;
  readonly maxTimeoutMs?: number;
}

/**
 * Runs `work` and runs it again, with jittered exponential backoff, only when PostgreSQL said the failure is
 * retryable. Every other error is rethrown at once. `work` must be safe to repeat (a whole transaction).
 */
export function withRetry<T>(work: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  return pRetry(work, {
    retries: options.retries ?? 4,
    minTimeout: options.minTimeoutMs ?? 20,
    maxTimeout: options.maxTimeoutMs ?? 1_000,
    randomize: true,
    shouldRetry: (error) => isRetryableDbError(error),
  });
}

/** The SQLSTATE PostgreSQL answered with, if the error came from the server. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** 23505: a unique constraint refused the row (a name taken). */
export const isUniqueViolation = (error: unknown) => sqlState(error) === "23505";

/** 23503: the row refers to one that is gone (deleted by a concurrent request). */
export const isForeignKeyViolation = (error: unknown) => sqlState(error) === "23503";

/** Class 22 (data exception): this input will never be accepted, however often it is sent. */
export const isDataException = (error: unknown) => sqlState(error)?.startsWith("22") ?? false;
