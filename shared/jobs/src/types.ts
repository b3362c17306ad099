/** Job states of spec 3.1. */
export const JobStatus = {
  Pending: "Pending",
  Running: "Running",
  Succeeded: "Succeeded",
  Failed: "Failed",
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

export function isJobStatus(value: unknown): value is JobStatus {
  return typeof value === "string" && Object.hasOwn(JobStatus, value);
}

/**
 * The one typed map of job types to their payloads, shared by enqueuers and handlers (like the bus's
 * SubjectMap). A wrong payload is a compile error.
 */
export interface JobPayloads {
  /** Deliver one event to one webhook subscription (spec 6.3). */
  "webhook.deliver": {
    subscriptionId: string;
    /** Generated once at enqueue; the X-Svc-Delivery header of every attempt. */
    deliveryId: string;
    eventId: string;
    event: string;
    workspaceKey: string | null;
    occurredAtUtc: string;
    data: unknown;
  };
  /** A job that does nothing: used by tests and the benchmark. */
  noop: Record<string, unknown>;
}
export type JobType = keyof JobPayloads;

/** Per-type defaults: each job type sets its own attempt limit (spec 3.1). */
export const jobTypeDefaults: Readonly<Record<JobType, { readonly maxAttempts: number }>> = {
  "webhook.deliver": { maxAttempts: 5 },
  noop: { maxAttempts: 3 },
};

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

/** The jobs list's view of a job record (spec 2.4; the route contract's JobView): the payload is not shown. */
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
