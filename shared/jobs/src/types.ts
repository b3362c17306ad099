/** Job states. */
export const JobStatus = {
  Pending: "Pending",
  Running: "Running",
  Succeeded: "Succeeded",
  Failed: "Failed",
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

/** A job type's name (`webhook.deliver`). */
export type JobType = string;

/** Per-type settings (each job type sets its own attempt limit). */
export interface JobTypeOptions {
  readonly maxAttempts: number;
}

/**
 * A job type: its name, its payload's type and its options, declared once by the service that owns it
 * and passed wherever jobs of the type are enqueued or handled (no global table of types: a job can only
 * be enqueued through its definition, so its options are always the owner's).
 */
export interface JobDefinition<P> extends JobTypeOptions {
  readonly type: JobType;
  /** A request to enqueue one job of this type (for `enqueueMany`), typed by the payload. */
  request(payload: P, options?: EnqueueOptions): JobRequest;
}

export interface EnqueueOptions {
  readonly workspaceKey?: string | null;
  /** Enqueueing the same (type, key) again makes no second job; the first job's id is returned. */
  readonly idempotencyKey?: string;
  /** Run no earlier than this. */
  readonly runAt?: Date;
  /** Overrides the type's attempt limit. */
  readonly maxAttempts?: number;
  /**
   * The trace the job's run continues (`traceparent[;tracestate]`): by default the enqueuer's current
   * one; a consumer of batched events names each event's own.
   */
  readonly traceContext?: string | null;
}

/** Marks a request made by a job type's definition: no other code can name it, so none can forge one. */
const madeByDefinition: unique symbol = Symbol("svc.job-request");

/**
 * One job to enqueue, as a definition's `request` makes it (and only it: `enqueueMany` refuses anything
 * else, so every job enqueued has its type's declared options).
 */
export interface JobRequest extends EnqueueOptions {
  readonly type: JobType;
  readonly payload: unknown;
  readonly maxAttempts: number;
  readonly [madeByDefinition]: true;
}

/** Whether `request` was made by a definition's `request` (checked by `enqueueMany` at run time too). */
export function isDefinedRequest(request: JobRequest): boolean {
  return (request as Partial<JobRequest>)[madeByDefinition] === true;
}

/** Declares a job type: `const deliverJob = defineJob<DeliverPayload>("webhook.deliver", { maxAttempts: 5 })`. */
export function defineJob<P>(type: JobType, options: JobTypeOptions): JobDefinition<P> {
  return {
    type,
    maxAttempts: options.maxAttempts,
    request: (payload, enqueue = {}) => ({
      ...enqueue,
      type,
      payload,
      maxAttempts: enqueue.maxAttempts ?? options.maxAttempts,
      [madeByDefinition]: true,
    }),
  };
}

/** A job that does nothing: used by tests and the benchmark. */
export const noopJob = defineJob<Record<string, unknown>>("noop", { maxAttempts: 3 });

/** A job as a handler sees it. */
export interface ClaimedJob<P = unknown> {
  readonly id: string;
  readonly type: JobType;
  readonly payload: P;
  readonly workspaceKey: string | null;
  /** This attempt's number, from 1. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The fencing token of this claim. */
  readonly token: string;
  readonly runAt: Date;
  readonly leaseExpiresAt: Date;
  /** The trace of what enqueued the job (tracing on), or null. */
  readonly traceContext: string | null;
  /** When it was enqueued (the database's clock). */
  readonly createdAt: Date;
}

/** The jobs list's view of a job record (the route contract's JobView): the payload is not shown. */
export interface JobView {
  readonly id: string;
  readonly type: string;
  readonly status: JobStatus;
  readonly workspaceKey: string | null;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly scheduledAtUtc: string;
  readonly createdAtUtc: string;
  readonly startedAtUtc: string | null;
  readonly completedAtUtc: string | null;
  readonly lastError: string | null;
}
