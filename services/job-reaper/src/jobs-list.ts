import { listWorkspace } from "@svc/access";
import type { Principal } from "@svc/bus";
import { type jobRoutes, type QueryOf, type ReplyBodyOf } from "@svc/contracts";
import { type Listing, type Queries, readPage, toPage } from "@svc/db";
import { type JobStatus, listJobs } from "@svc/jobs";

type JobsList = (typeof jobRoutes)["jobs.list"];

/** Newest first by id; the cursor carries the last id seen (an int8). */
const JOBS: Listing = { tag: "jobs", kinds: ["bigint"] };

/**
 * The jobs list. The caller's reach decides which jobs it sees: a platform session sees all
 * (and may filter by workspace); a workspace session only its workspace's.
 */
export async function listJobsFor(
  db: Queries,
  principal: Principal,
  query: QueryOf<JobsList>,
): Promise<ReplyBodyOf<JobsList>> {
  const { limit, after } = readPage(query, JOBS);
  const workspaceKey = listWorkspace(principal, query.workspaceKey);
  // One extra row tells whether another page exists.
  const rows = await listJobs(db, {
    limit: limit + 1,
    status: query.status as JobStatus | undefined,
    type: query.type,
    workspaceKey,
    beforeId: after?.[0],
  });
  return toPage(rows, limit, JOBS, (last) => [last.id]);
}
