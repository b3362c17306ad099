import type { Queries } from "@svc/db";

import { insertJobs } from "./queries.js";
import { type JobPayloads, type JobType, jobTypeOptions } from "./types.js";

export interface EnqueueOptions {
  readonly workspaceKey?: string | null;
  /** Enqueueing the same (type, key) again makes no second job; the first job's id is returned. */
  readonly idempotencyKey?: string;
  /** Run no earlier than this. */
  readonly runAt?: Date;
  /** Overrides the type's default attempt limit. */
  readonly maxAttempts?: number;
}

export interface Enqueued {
  readonly id: string;
  /** False when an earlier job with the same idempotency key exists. */
  readonly created: boolean;
}

export interface JobRequest<T extends JobType = JobType> extends EnqueueOptions {
  readonly type: T;
  readonly payload: JobPayloads[T];
}

/**
 * Enqueues jobs (in the caller's transaction when `db` is one, so a job exists exactly when the change
 * that asked for it committed). Workers are woken by the insert trigger's NOTIFY.
 */
export async function enqueueMany(db: Queries, jobs: readonly JobRequest[]): Promise<Enqueued[]> {
  return insertJobs(
    db,
    jobs.map((j) => ({
      type: j.type,
      payload: j.payload,
      workspaceKey: j.workspaceKey ?? null,
      maxAttempts: j.maxAttempts ?? jobTypeOptions(j.type).maxAttempts,
      runAt: j.runAt ?? null,
      idempotencyKey: j.idempotencyKey ?? null,
    })),
  );
}

export async function enqueue<T extends JobType>(
  db: Queries,
  type: T,
  payload: JobPayloads[T],
  options: EnqueueOptions = {},
): Promise<Enqueued> {
  const [result] = await enqueueMany(db, [{ type, payload, ...options }]);
  return result as Enqueued;
}
