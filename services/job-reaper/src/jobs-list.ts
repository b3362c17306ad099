import type { JobsListQuery, JobsListReply, Principal } from "@svc/bus";
import { decodeCursor as decode, encodeCursor as encode, type Queries } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError, type Violation } from "@svc/errors";
import { isJobStatus, JobStatus, listJobs } from "@svc/jobs";

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 50;

const JOBS_CURSOR = "jobs";

/** Cursors are opaque to callers: the last id seen, strictly checked (an int8) when it comes back. */
export function encodeCursor(id: string): string {
  return encode(JOBS_CURSOR, [id]);
}

export function decodeCursor(cursor: string): string | null {
  return decode(cursor, JOBS_CURSOR, ["bigint"])?.[0] ?? null;
}

/** Checks the query; every violation is listed (400). Over-large limits are rejected, not clamped. */
export function parseJobsQuery(query: JobsListQuery) {
  const violations: Violation[] = [];
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    violations.push({ field: "/query/limit", message: `must be an integer from 1 to ${MAX_PAGE_SIZE}` });
  }
  if (query.status !== undefined && !isJobStatus(query.status)) {
    violations.push({
      field: "/query/status",
      message: `must be one of ${Object.values(JobStatus).join(", ")}`,
    });
  }
  if (query.type !== undefined && (query.type.length === 0 || query.type.length > 100)) {
    violations.push({ field: "/query/type", message: "must be 1 to 100 characters" });
  }
  let beforeId: string | undefined;
  if (query.cursor !== undefined) {
    const decoded = decodeCursor(query.cursor);
    if (decoded === null)
      violations.push({ field: "/query/cursor", message: "is not a cursor this API issued" });
    else beforeId = decoded;
  }
  if (violations.length > 0) throw new ValidationError(violations);
  return {
    limit,
    status: query.status as JobStatus | undefined,
    type: query.type,
    beforeId,
  };
}

/**
 * The caller's reach decides which jobs it sees (spec 8): a platform session sees all (and may filter by
 * workspace); a workspace session sees only its workspace's, and naming another workspace is a 404; a
 * session without a scope sees nothing.
 */
export function workspaceFilter(principal: Principal, requested: string | undefined): string | undefined {
  if (principal.scope === "platform") return requested;
  if (principal.scope === "workspace" && principal.workspaceKey !== null) {
    if (requested !== undefined && requested !== principal.workspaceKey) {
      throw new NotFoundError(`Workspace '${requested}' was not found.`);
    }
    return principal.workspaceKey;
  }
  throw new SvcError(ErrorCode.Forbidden, "The session has no scope, so it reaches no jobs.");
}

export async function listJobsFor(
  db: Queries,
  principal: Principal,
  query: JobsListQuery,
): Promise<JobsListReply> {
  const parsed = parseJobsQuery(query);
  const workspaceKey = workspaceFilter(principal, query.workspaceKey);
  // One extra row tells whether another page exists.
  const rows = await listJobs(db, { ...parsed, workspaceKey, limit: parsed.limit + 1 });
  const items = rows.slice(0, parsed.limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > parsed.limit && last ? encodeCursor(last.id) : null };
}
