/** Job states. */
export const JobStatus = {
  Pending: "Pending",
  Running: "Running",
  Succeeded: "Succeeded",
  Failed: "Failed",
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

/**
 * The one typed map of job types to their payloads, shared by enqueuers and handlers (like the bus's
 * SubjectMap). The library declares only `noop`; each service declares the types it owns by module
 * augmentation, as graphile-worker's `GraphileWorker.Tasks`:
 *
 *     declare module "@svc/jobs" {
 *       interface JobPayloads { "webhook.deliver": DeliverPayload }
 *     }
 *
 * A wrong payload, or a type nobody declared, is a compile error.
 */

export interface JobPayloads {
  /** A job that does nothing: used by tests and the benchmark. */
  noop: Record<string, unknown>;
}
export type JobType = keyof JobPayloads;

/** Per-type settings (each job type sets its own attempt limit). */
export interface JobTypeOptions {
  readonly maxAttempts: number;
}

const DEFAULT_OPTIONS: JobTypeOptions = { maxAttempts: 3 };
const registered = new Map<string, JobTypeOptions>();

/** Declares a job type's settings; the service that owns the type calls it once, at import. */
export function defineJobType(type: JobType, options: JobTypeOptions): void {
  registered.set(type, options);
}

/** A job type's settings: as its owner declared them, else the defaults (3 attempts). */
export function jobTypeOptions(type: JobType): JobTypeOptions {
  return registered.get(type) ?? DEFAULT_OPTIONS;
}

/** A job as a handler sees it. */
export interface ClaimedJob<T extends JobType = JobType> {
  readonly id: string;
  readonly type: T;
  readonly payload: JobPayloads[T];
  readonly workspaceKey: string | null;
  /** This attempt's number, from 1. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The fencing token of this claim. */
  readonly token: string;
  readonly runAt: Date;
  readonly leaseExpiresAt: Date;
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
