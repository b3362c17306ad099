import { listWorkspace } from "@svc/access";
import { type jobRoutes, type RouteHandlerWith } from "@svc/contracts";
import { type Listing, type Queries, readPage, toPage } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import {
  cancelJob,
  type JobActionOutcome,
  type JobStatus,
  type JobView,
  type ListFilter,
  listJobs,
  retryDeadLetter,
  runJobNow,
} from "@svc/jobs";

type JobsList = (typeof jobRoutes)["jobs.list"];
type JobsRetry = (typeof jobRoutes)["jobs.retry"];
type JobsRunNow = (typeof jobRoutes)["jobs.run-now"];
type JobsCancel = (typeof jobRoutes)["jobs.cancel"];

/** Newest first by id; the cursor carries the last id seen (an int8). */
const JOBS: Listing = { tag: "jobs", kinds: ["bigint"] };

/**
 * What the jobs routes ask of the job table: jobs matching a filter, newest first; a dead letter retried;
 * a waiting job made due now, or ended. `workspaceKey` limits each action to one workspace's jobs.
 */
export interface JobsRepository {
  list(filter: ListFilter): Promise<JobView[]>;
  retry(id: string, workspaceKey: string | undefined): Promise<JobActionOutcome>;
  runNow(id: string, workspaceKey: string | undefined): Promise<JobActionOutcome>;
  cancel(id: string, workspaceKey: string | undefined, reason: string): Promise<JobActionOutcome>;
}

/** The job library's table. */
export const jobTable = (db: Queries): JobsRepository => ({
  list: (filter) => listJobs(db, filter),
  retry: (id, workspaceKey) => retryDeadLetter(db, id, workspaceKey),
  runNow: (id, workspaceKey) => runJobNow(db, id, workspaceKey),
  cancel: (id, workspaceKey, reason) => cancelJob(db, id, workspaceKey, reason),
});

/**
 * `GET /api/jobs`. The caller's reach decides which jobs it sees: a platform session sees all
 * (and may filter by workspace); a workspace session only its workspace's.
 */
export const listJobsRoute: RouteHandlerWith<{ readonly jobs: JobsRepository }, JobsList> = async (
  deps,
  { principal, query },
) => {
  const { limit, after } = readPage(query, JOBS);
  const workspaceKey = listWorkspace(principal, query.workspaceKey);
  // One extra row tells whether another page exists.
  const rows = await deps.jobs.list({
    limit: limit + 1,
    status: query.status as JobStatus | undefined,
    type: query.type,
    workspaceKey,
    beforeId: after?.[0],
  });
  return { status: 200, body: toPage(rows, limit, JOBS, (last) => [last.id]) };
};

/**
 * The answer to an action on one job: the job as it is now; 404 for a job the caller cannot reach (as if
 * absent); 409 for a job whose status the action does not apply to.
 */
function actionReply(id: string, outcome: JobActionOutcome, applies: string) {
  if ("missing" in outcome) throw new NotFoundError(`Job ${id} was not found.`);
  if ("status" in outcome) throw new ConflictError(`Job ${id} is ${outcome.status}: ${applies}`);
  return { status: 200 as const, body: outcome.job };
}

/**
 * `POST /api/jobs/{id}/retry`: a dead letter back in the queue for one more attempt. A workspace session
 * reaches its workspace's jobs only.
 */
export const retryJobRoute: RouteHandlerWith<{ readonly jobs: JobsRepository }, JobsRetry> = async (
  deps,
  { principal, params },
) =>
  actionReply(
    params.id,
    await deps.jobs.retry(params.id, listWorkspace(principal, undefined)),
    "only a Failed job (a dead letter) is retried.",
  );

/** `POST /api/jobs/{id}/run-now`: a waiting job due now (its backoff or circuit wait skipped). */
export const runJobNowRoute: RouteHandlerWith<{ readonly jobs: JobsRepository }, JobsRunNow> = async (
  deps,
  { principal, params },
) =>
  actionReply(
    params.id,
    await deps.jobs.runNow(params.id, listWorkspace(principal, undefined)),
    "only a waiting (Pending) job is made due now.",
  );

/**
 * `POST /api/jobs/{id}/cancel`: a waiting job ended as a dead letter; its last error says who ended it
 * (the caller's user name, or its id for an API client).
 */
export const cancelJobRoute: RouteHandlerWith<{ readonly jobs: JobsRepository }, JobsCancel> = async (
  deps,
  { principal, params },
) =>
  actionReply(
    params.id,
    await deps.jobs.cancel(
      params.id,
      listWorkspace(principal, undefined),
      `Cancelled by ${principal.name ?? principal.subject}.`,
    ),
    "only a waiting (Pending) job is cancelled; a running one finishes its attempt.",
  );
