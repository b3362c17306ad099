import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, Page, Problem, Table, useLoad, when } from "../ui.js";

const STATUSES = ["", "Pending", "Running", "Succeeded", "Failed"] as const;

/** Jobs with a status and type filter, paged by cursor; a dead letter shows its last error and is retried. */
export function Jobs() {
  const [filter, setFilter] = useState<{ status: string; type: string }>({ status: "", type: "" });
  const [cursors, setCursors] = useState<string[]>([]);
  const [error, setError] = useState<string | null>(null);
  const cursor = cursors.at(-1);
  const jobs = useLoad(
    () =>
      call("jobs.list", {
        query: {
          limit: 50,
          ...(filter.status ? { status: filter.status } : {}),
          ...(filter.type ? { type: filter.type } : {}),
          ...(cursor ? { cursor } : {}),
        },
      }),
    [filter.status, filter.type, cursor],
  );
  /** After an action: the error cleared, the page read again. */
  const done = () => {
    setError(null);
    jobs.reload();
  };
  return (
    <Page title="Jobs">
      <form
        aria-label="Filter jobs"
        onSubmit={(e) => {
          e.preventDefault();
          const data = new FormData(e.currentTarget);
          setCursors([]);
          const text = (name: string) => {
            const value = data.get(name);
            return typeof value === "string" ? value : "";
          };
          setFilter({ status: text("status"), type: text("type") });
        }}
      >
        <label>
          <span>Status</span>
          <select name="status">
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Type</span>
          <input name="type" />
        </label>
        <button type="submit">Filter</button>
      </form>
      <Problem text={error ?? jobs.error} />
      <Table
        caption="Jobs, newest first"
        rows={jobs.data?.items ?? []}
        empty={jobs.loading ? "Loading…" : "No jobs."}
        columns={[
          ["Job", (j) => <code>{j.id}</code>],
          ["Type", (j) => j.type],
          ["Status", (j) => j.status],
          ["Attempts", (j) => `${j.attempts} of ${j.maxAttempts}`],
          ["Workspace", (j) => j.workspaceKey ?? "–"],
          ["Scheduled", (j) => when(j.scheduledAtUtc)],
          ["Last error", (j) => j.lastError ?? ""],
          [
            "",
            (j) =>
              j.status === "Failed" ? (
                <Action
                  label={`Retry job ${j.id}`}
                  allowed={can("job.execute")}
                  run={() => call("jobs.retry", { params: { id: j.id } })}
                  onDone={done}
                  onError={setError}
                />
              ) : j.status === "Pending" ? (
                <>
                  <Action
                    label={`Run job ${j.id} now`}
                    allowed={can("job.execute")}
                    run={() => call("jobs.run-now", { params: { id: j.id } })}
                    onDone={done}
                    onError={setError}
                  />
                  <Action
                    label={`Cancel job ${j.id}`}
                    danger
                    allowed={can("job.execute")}
                    run={() => call("jobs.cancel", { params: { id: j.id } })}
                    onDone={done}
                    onError={setError}
                  />
                </>
              ) : null,
          ],
        ]}
      />
      <nav aria-label="Pages of jobs" class="pager">
        <button
          type="button"
          disabled={cursors.length === 0}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Newer
        </button>
        <button
          type="button"
          disabled={!jobs.data?.nextCursor}
          onClick={() => jobs.data?.nextCursor && setCursors([...cursors, jobs.data.nextCursor])}
        >
          Older
        </button>
      </nav>
    </Page>
  );
}
