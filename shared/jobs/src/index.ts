export { retryDelayMs } from "./backoff.js";
export { createJobMetrics, type JobMetrics } from "./metrics.js";
export {
  type ListFilter,
  listJobs,
  queueDepth,
  reapExpiredLeases,
  type ReapResult,
  wakeJobsWaitingOn,
} from "./queries.js";
export { enqueue, type Enqueued, enqueueMany, type EnqueueOptions, type JobRequest } from "./queue.js";
export {
  type ClaimedJob,
  defineJobType,
  type JobPayloads,
  JobStatus,
  type JobType,
  type JobTypeOptions,
  type JobView,
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
