import type { Queries } from "@svc/db";
import { currentTraceContext } from "@svc/observability";

import { insertJobs } from "./queries.js";
import { type EnqueueOptions, isDefinedRequest, type JobDefinition, type JobRequest } from "./types.js";

export interface Enqueued {
  readonly id: string;
  /** False when an earlier job with the same idempotency key exists. */
  readonly created: boolean;
}

/**
 * Enqueues jobs (in the caller's transaction when `db` is one, so a job exists exactly when the change
 * that asked for it committed), each made by its type's definition (`definition.request(payload)`).
 * Workers are woken by the insert trigger's NOTIFY.
 */
export async function enqueueMany(db: Queries, jobs: readonly JobRequest[]): Promise<Enqueued[]> {
  const forged = jobs.find((j) => !isDefinedRequest(j));
  if (forged !== undefined) {
    throw new TypeError(
      `A job of type "${String(forged.type)}" was not made by its type's definition (defineJob(...).request).`,
    );
  }
  return insertJobs(
    db,
    jobs.map((j) => ({
      type: j.type,
      payload: j.payload,
      workspaceKey: j.workspaceKey ?? null,
      maxAttempts: j.maxAttempts,
      runAt: j.runAt ?? null,
      idempotencyKey: j.idempotencyKey ?? null,
      // The job's run continues the enqueuer's trace (or the one it names): NULL when tracing is off.
      traceContext: j.traceContext !== undefined ? j.traceContext : currentTraceContext(),
    })),
  );
}

/** Enqueues one job of a type. */
export async function enqueue<P>(
  db: Queries,
  definition: JobDefinition<P>,
  payload: P,
  options: EnqueueOptions = {},
): Promise<Enqueued> {
  const [result] = await enqueueMany(db, [definition.request(payload, options)]);
  return result as Enqueued;
}
