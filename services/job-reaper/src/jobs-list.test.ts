/**
 * The jobs list through its contract, with an in-memory job repository: no NATS, no PostgreSQL. What the
 * route promises: the caller's reach decides what it sees, filters narrow it, pages walk it newest first.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, jobRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import type { JobStatus, JobView, ListFilter } from "@svc/jobs";
import { describe, expect, it } from "vitest";

import {
  cancelJobRoute,
  type JobsRepository,
  listJobsRoute,
  retryJobRoute,
  runJobNowRoute,
} from "./jobs-list.js";

/** Jobs held in memory, answering the repository's one question as the table does. */
class MemoryJobs implements JobsRepository {
  readonly asked: ListFilter[] = [];
  constructor(private readonly jobs: readonly JobView[]) {}

  async list(filter: ListFilter): Promise<JobView[]> {
    this.asked.push(filter);
    return this.jobs
      .filter(
        (j) =>
          (filter.status === undefined || j.status === filter.status) &&
          (filter.type === undefined || j.type === filter.type) &&
          (filter.workspaceKey === undefined || j.workspaceKey === filter.workspaceKey) &&
          (filter.beforeId === undefined || BigInt(j.id) < BigInt(filter.beforeId)),
      )
      .sort((a, b) => Number(BigInt(b.id) - BigInt(a.id)))
      .slice(0, filter.limit);
  }

  /** One job the caller reaches, changed by `change` when it is in `from`: the table's three answers. */
  private act(
    id: string,
    workspaceKey: string | undefined,
    from: JobStatus,
    change: (j: JobView) => JobView,
  ) {
    const found = this.jobs.find(
      (j) => j.id === id && (workspaceKey === undefined || j.workspaceKey === workspaceKey),
    );
    if (found === undefined) return { missing: true } as const;
    if (found.status !== from) return { status: found.status };
    return { job: change(found) };
  }

  async retry(id: string, workspaceKey: string | undefined) {
    return this.act(id, workspaceKey, "Failed", (j) => ({
      ...j,
      status: "Pending" as const,
      maxAttempts: Math.max(j.maxAttempts, j.attempts + 1),
    }));
  }

  async runNow(id: string, workspaceKey: string | undefined) {
    return this.act(id, workspaceKey, "Pending", (j) => ({ ...j, scheduledAtUtc: "now" }));
  }

  readonly reasons: string[] = [];
  async cancel(id: string, workspaceKey: string | undefined, reason: string) {
    this.reasons.push(reason);
    return this.act(id, workspaceKey, "Pending", (j) => ({
      ...j,
      status: "Failed" as const,
      lastError: reason,
    }));
  }
}

const at = "2026-11-26T10:00:00.000Z";
function job(
  id: number,
  workspaceKey: string | null,
  status: JobStatus = "Succeeded",
  type = "noop",
): JobView {
  return {
    id: String(id),
    type,
    status,
    workspaceKey,
    attempts: 1,
    maxAttempts: 3,
    scheduledAtUtc: at,
    createdAtUtc: at,
    startedAtUtc: at,
    completedAtUtc: status === "Succeeded" || status === "Failed" ? at : null,
    lastError: status === "Failed" ? "boom" : null,
  };
}

const jobs = new MemoryJobs([
  job(1, "alpha"),
  job(2, "beta", "Failed", "webhook.deliver"),
  job(3, null, "Pending"),
  job(4, "alpha", "Failed", "webhook.deliver"),
  job(5, "alpha", "Running"),
]);
const deps = { jobs };

const operator = caller(["job.read", "job.execute"]);
const alphaAdmin: Principal = {
  subject: "a",
  scope: "workspace",
  workspaceKey: "alpha",
  permissions: ["job.read", "job.execute"],
  roles: ["admin"],
};

const list = (principal: Principal, query: Record<string, unknown> = {}) =>
  callRoute(jobRoutes["jobs.list"], (req) => listJobsRoute(deps, req), {
    principal,
    params: {},
    query,
    body: null,
  });
const ids = (reply: Awaited<ReturnType<typeof list>>) => reply.body?.items.map((j) => j.id);

describe("GET /api/jobs", () => {
  it("shows an operator every job, newest first, and filters by workspace, status and type", async () => {
    expect(ids(await list(operator))).toEqual(["5", "4", "3", "2", "1"]);
    expect(ids(await list(operator, { workspaceKey: "beta" }))).toEqual(["2"]);
    expect(ids(await list(operator, { status: "Failed", type: "webhook.deliver" }))).toEqual(["4", "2"]);
  });

  it("shows a workspace session its own workspace's jobs only, and no other workspace exists for it", async () => {
    expect(ids(await list(alphaAdmin))).toEqual(["5", "4", "1"]);
    await expect(list(alphaAdmin, { workspaceKey: "beta" })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
  });

  it("walks pages with the cursor it issues, and the last page says so", async () => {
    const first = await list(operator, { limit: 2 });
    expect(ids(first)).toEqual(["5", "4"]);
    const cursor = first.body?.nextCursor;
    expect(typeof cursor).toBe("string");
    const second = await list(operator, { limit: 2, cursor });
    expect(ids(second)).toEqual(["3", "2"]);
    const third = await list(operator, { limit: 2, cursor: second.body?.nextCursor });
    expect(ids(third)).toEqual(["1"]);
    expect(third.body?.nextCursor).toBeNull();
  });

  it("refuses what the contract refuses before asking the repository", async () => {
    const before = jobs.asked.length;
    await expect(list(operator, { limit: 101 })).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    await expect(list(operator, { status: "Lost" })).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
    });
    await expect(list(operator, { cursor: "not-a-cursor" })).rejects.toMatchObject({ status: 400 });
    await expect(list({ ...operator, permissions: [] })).rejects.toMatchObject({ code: ErrorCode.Forbidden });
    expect(jobs.asked.length).toBe(before);
  });
});

const retry = (principal: Principal, id: string) =>
  callRoute(jobRoutes["jobs.retry"], (req) => retryJobRoute(deps, req), {
    principal,
    params: { id },
    query: {},
    body: null,
  });

describe("POST /api/jobs/{id}/retry", () => {
  it("puts a dead letter back in the queue; refuses a job that is not Failed (409) and one it cannot reach (404)", async () => {
    expect((await retry(operator, "2")).body).toMatchObject({ id: "2", status: "Pending" });
    await expect(retry(operator, "1")).rejects.toMatchObject({ code: ErrorCode.Conflict });
    await expect(retry(operator, "99")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    // beta's dead letter is not alpha's to retry: absent for it.
    await expect(retry(alphaAdmin, "2")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect((await retry(alphaAdmin, "4")).body).toMatchObject({ id: "4", status: "Pending" });
    await expect(retry(operator, "not-a-number")).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
  });
});

describe("POST /api/jobs/{id}/run-now and /cancel", () => {
  const waiting = new MemoryJobs([
    job(1, "alpha", "Pending"),
    job(2, "beta", "Pending"),
    job(3, "alpha", "Running"),
    job(4, "alpha", "Failed"),
    job(5, null, "Succeeded"),
  ]);
  const call = (key: "jobs.run-now" | "jobs.cancel", principal: Principal, id: string) => {
    const req = { principal, params: { id }, query: {}, body: null };
    return key === "jobs.run-now"
      ? callRoute(jobRoutes[key], (r) => runJobNowRoute({ jobs: waiting }, r), req)
      : callRoute(jobRoutes[key], (r) => cancelJobRoute({ jobs: waiting }, r), req);
  };

  it("acts on a waiting job only: 409 for one running or ended, 404 for one out of reach", async () => {
    for (const key of ["jobs.run-now", "jobs.cancel"] as const) {
      expect((await call(key, operator, "1")).body).toMatchObject({ id: "1" });
      expect((await call(key, alphaAdmin, "1")).body).toMatchObject({ id: "1" });
      for (const ended of ["3", "4", "5"]) {
        await expect(call(key, operator, ended)).rejects.toMatchObject({ code: ErrorCode.Conflict });
      }
      await expect(call(key, alphaAdmin, "2")).rejects.toMatchObject({ code: ErrorCode.NotFound });
      await expect(call(key, operator, "99")).rejects.toMatchObject({ code: ErrorCode.NotFound });
      await expect(call(key, operator, "0")).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
      await expect(call(key, { ...operator, permissions: ["job.read"] }, "1")).rejects.toMatchObject({
        code: ErrorCode.Forbidden,
      });
    }
  });

  it("names who cancelled in the job's last error: the user's name, or the client's id", async () => {
    waiting.reasons.length = 0;
    await call("jobs.cancel", { ...operator, name: "ada" }, "1");
    await call("jobs.cancel", operator, "1");
    expect(waiting.reasons).toEqual(["Cancelled by ada.", "Cancelled by op."]);
  });
});
