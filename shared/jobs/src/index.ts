export { retryDelayMs } from "./backoff.js";
export { createJobMetrics, type JobMetrics } from "./metrics.js";
export {
  announceDeadLetters,
  cancelJob,
  type DeadLetter,
  deleteEndedJobs,
  failedJobsOfType,
  failedKeyedJobs,
  type JobActionOutcome,
  keyedJob,
  type ListFilter,
  listJobs,
  nextRunOfKeyedJob,
  type PendingSelection,
  queueDepth,
  reapExpiredLeases,
  type ReapResult,
  releaseWorkspaceJobs,
  retryDeadLetter,
  runJobNow,
  runPendingJobsNow,
  wakeJobsWaitingOn,
} from "./queries.js";
export { enqueue, type Enqueued, enqueueMany } from "./queue.js";
export {
  type ClaimedJob,
  defineJob,
  type EnqueueOptions,
  type JobDefinition,
  type JobRequest,
  JobStatus,
  type JobType,
  type JobTypeOptions,
  type JobView,
  noopJob,
} from "./types.js";
export {
  DeferJobError,
  type HandlerRegistration,
  type JobContext,
  JobWorker,
  PermanentJobError,
  RetryLaterError,
  type WorkerOptions,
  type WorkerStats,
} from "./worker.js";

/**
 * The job tables' migrations, relative to the repository (or image) root. The tables live in the schema
 * job_reaper, so the migrator applies these files in the job-reaper service's sequence (`alsoFrom`).
 */
export const JOB_MIGRATIONS = { service: "job-reaper", directory: "shared/jobs/migrations" } as const;
