import { listWorkspace } from "@svc/access";
import { type jobRoutes, type RouteHandlerWith } from "@svc/contracts";
import { type Listing, type Queries, readPage, toPage } from "@svc/db";
import { type JobStatus, type JobView, type ListFilter, listJobs } from "@svc/jobs";

type JobsList = (typeof jobRoutes)["jobs.list"];

/** Newest first by id; the cursor carries the last id seen (an int8). */
const JOBS: Listing = { tag: "jobs", kinds: ["bigint"] };

/** What the jobs list asks of the job table: jobs matching a filter, newest first. */
export interface JobsRepository {
  list(filter: ListFilter): Promise<JobView[]>;
}

/** The job library's table. */
export const jobTable = (db: Queries): JobsRepository => ({ list: (filter) => listJobs(db, filter) });

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
