import { useState } from "preact/hooks";

import { ApiError, call } from "../api.js";
import { Action, Page, Problem, Table, useLoad, when } from "../ui.js";

/** The diagnostics recorder: start, stop, and what it recorded (database commands, NATS requests). */
export function Diagnostics() {
  // No recording yet is a 404: shown as none, not as an error.
  const recording = useLoad(() =>
    call("diagnostics.get", { query: { limit: 100 } }).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }),
  );
  const [error, setError] = useState<string | null>(null);
  const r = recording.data;
  return (
    <Page title="Diagnostics">
      <p>
        The recorder keeps, across all services, the database commands (with their values) and NATS requests
        it sees, until it is stopped, a time passes or enough are kept. Record only while looking into a
        problem.
      </p>
      <Problem text={error ?? recording.error} />
      <p role="status">
        {r
          ? `Recording ${r.id}: ${r.status}, ${r.entryCount} entries, started ${when(r.startedAtUtc)} by ${r.startedBy}${r.stoppedAtUtc ? `, stopped ${when(r.stoppedAtUtc)} (${r.stopReason ?? ""})` : `, stops by ${when(r.stopsAtUtc)}`}.`
          : recording.loading
            ? "Loading…"
            : "Nothing has been recorded."}
      </p>
      <span class="actions">
        <Action
          label="Start recording"
          run={() => call("diagnostics.start", { body: { maxDurationSeconds: 60 } })}
          onDone={recording.reload}
          onError={setError}
        />
        <Action
          label="Stop recording"
          run={() => call("diagnostics.stop")}
          onDone={recording.reload}
          onError={setError}
        />
        <button type="button" onClick={recording.reload}>
          Refresh
        </button>
      </span>
      <Table
        caption="Recorded, oldest first"
        rows={r?.items ?? []}
        empty="No entries."
        columns={[
          ["When", (e) => when(e.atUtc)],
          ["Service", (e) => e.service],
          ["Kind", (e) => e.kind],
          ["Command", (e) => <code>{e.text}</code>],
          ["ms", (e) => e.durationMs.toFixed(1)],
          ["Outcome", (e) => e.outcome],
        ]}
      />
    </Page>
  );
}
