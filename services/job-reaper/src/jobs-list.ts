import { listWorkspace } from "@svc/access";
import { type jobRoutes, type RouteHandlerWith } from "@svc/contracts";
import { type Listing, type Queries, readPage, toPage } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import { type JobStatus, type JobView, type ListFilter, listJobs, retryDeadLetter } from "@svc/jobs";

type JobsList = (typeof jobRoutes)["jobs.list"];
type JobsRetry = (typeof jobRoutes)["jobs.retry"];

/** Newest first by id; the cursor carries the last id seen (an int8). */
const JOBS: Listing = { tag: "jobs", kinds: ["bigint"] };

/** What the jobs routes ask of the job table: jobs matching a filter, newest first; a dead letter retried. */
export interface JobsRepository {
  list(filter: ListFilter): Promise<JobView[]>;
  retry(id: string, workspaceKey: string | undefined): ReturnType<typeof retryDeadLetter>;
}

/** The job library's table. */
export const jobTable = (db: Queries): JobsRepository => ({
  list: (filter) => listJobs(db, filter),
  retry: (id, workspaceKey) => retryDeadLetter(db, id, workspaceKey),
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
 * `POST /api/jobs/{id}/retry`: a dead letter back in the queue for one more attempt. A workspace session
 * reaches its workspace's jobs only (another's is 404, as if absent).
 */
export const retryJobRoute: RouteHandlerWith<{ readonly jobs: JobsRepository }, JobsRetry> = async (
  deps,
  { principal, params },
) => {
  const outcome = await deps.jobs.retry(params.id, listWorkspace(principal, undefined));
  if ("missing" in outcome) throw new NotFoundError(`Job ${params.id} was not found.`);
  if ("status" in outcome) {
    throw new ConflictError(
      `Job ${params.id} is ${outcome.status}: only a Failed job (a dead letter) is retried.`,
    );
  }
  return { status: 200, body: outcome.job };
};
