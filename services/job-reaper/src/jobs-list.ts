import { listWorkspace } from "@svc/access";
import type { Principal } from "@svc/bus";
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
/** The actions on one job: retry, run now, cancel (the same params and reply). */
type JobsAction = (typeof jobRoutes)["jobs.retry" | "jobs.run-now" | "jobs.cancel"];

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
 * A route acting on one job the caller reaches: what it does, and the statuses it applies to. The three
 * routes share their params and reply (the contracts say so; the service's implementation checks it).
 */
function jobAction(
  act: (
    jobs: JobsRepository,
    id: string,
    workspaceKey: string | undefined,
    principal: Principal,
  ) => Promise<JobActionOutcome>,
  applies: string,
): RouteHandlerWith<{ readonly jobs: JobsRepository }, JobsAction> {
  return async (deps, { principal, params }) =>
    actionReply(
      params.id,
      await act(deps.jobs, params.id, listWorkspace(principal, undefined), principal),
      applies,
    );
}

/**
 * `POST /api/jobs/{id}/retry`: a dead letter back in the queue for one more attempt. A workspace session
 * reaches its workspace's jobs only.
 */
export const retryJobRoute = jobAction(
  (jobs, id, workspaceKey) => jobs.retry(id, workspaceKey),
  "only a Failed job (a dead letter) is retried.",
);

/** `POST /api/jobs/{id}/run-now`: a waiting job due now (its backoff or circuit wait skipped). */
export const runJobNowRoute = jobAction(
  (jobs, id, workspaceKey) => jobs.runNow(id, workspaceKey),
  "only a waiting (Pending) job is made due now.",
);

/**
 * `POST /api/jobs/{id}/cancel`: a waiting job ended as a dead letter; its last error says who ended it
 * (the caller's user name, or its id for an API client).
 */
export const cancelJobRoute = jobAction(
  (jobs, id, workspaceKey, principal) =>
    jobs.cancel(id, workspaceKey, `Cancelled by ${principal.name ?? principal.subject}.`),
  "only a waiting (Pending) job is cancelled; a running one finishes its attempt.",
);
