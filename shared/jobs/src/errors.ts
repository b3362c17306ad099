/** What a job handler throws to say how its job goes on. */
/** A handler's failure may ask for a later retry (a receiver's Retry-After). */
export class RetryLaterError extends Error {
  override readonly name = "RetryLaterError";
  constructor(
    message: string,
    readonly retryAfterMs: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * The job did not try and must not spend an attempt: it runs again after `delayMs` with its attempt count
 * unchanged (a delivery whose receiver's circuit is open).
 */
export class DeferJobError extends Error {
  override readonly name = "DeferJobError";
  constructor(
    message: string,
    readonly delayMs: number,
    /**
     * What the job waits on (a receiver's circuit, say): `wakeJobsWaitingOn` with the same key makes it
     * due at once, before `delayMs`.
     */
    readonly waitingOn?: string,
  ) {
    super(message);
  }
}

/** A failure no retry can mend (a refused target, a malformed payload): the job is dead-lettered now. */
export class PermanentJobError extends Error {
  override readonly name = "PermanentJobError";
}
