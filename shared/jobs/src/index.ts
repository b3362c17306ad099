export { BACKOFF_BASE_MS, retryDelayMs } from "./backoff.js";
export { createJobMetrics, type JobMetrics } from "./metrics.js";
export { type ListFilter, listJobs, queueDepth, reapExpiredLeases, type ReapResult } from "./queries.js";
export { enqueue, type Enqueued, enqueueMany, type EnqueueOptions, type JobRequest } from "./queue.js";
export {
  type ClaimedJob,
  defineJobType,
  isJobStatus,
  type JobPayloads,
  JobStatus,
  type JobType,
  type JobTypeOptions,
  jobTypeOptions,
  type JobView,
} from "./types.js";
export {
  DeferJobError,
  type HandlerRegistration,
  type JobContext,
  JobWorker,
  NOTIFY_CHANNEL,
  PermanentJobError,
  RetryLaterError,
  type WorkerOptions,
  type WorkerStats,
} from "./worker.js";
