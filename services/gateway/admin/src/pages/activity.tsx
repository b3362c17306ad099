import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, Page, Problem, Table, useLoad, when } from "../ui.js";

/** Notifications for the session (mark read), the flows (delete), and the platform's configuration. */
export function Notifications() {
  const [unreadOnly, setUnreadOnly] = useState(true);
  const list = useLoad(() => call("notifications.list", { query: { limit: 100, unreadOnly } }), [unreadOnly]);
  const [error, setError] = useState<string | null>(null);
  return (
    <Page title="Notifications">
      <label class="inline">
        <input
          type="checkbox"
          checked={unreadOnly}
          onChange={(e) => setUnreadOnly(e.currentTarget.checked)}
        />
        <span>Unread only</span>
      </label>
      <Problem text={error ?? list.error} />
      <Table
        caption="Notifications, newest first"
        rows={list.data?.items ?? []}
        empty={list.loading ? "Loading…" : "No notifications."}
        columns={[
          ["When", (n) => when(n.createdAtUtc)],
          ["Title", (n) => n.title],
          ["Detail", (n) => n.detail ?? ""],
          ["From", (n) => n.origin],
          ["Workspace", (n) => n.workspaceKey ?? "–"],
          [
            "",
            (n) =>
              n.readAtUtc === null ? (
                <Action
                  label={`Mark "${n.title}" read`}
                  run={() => call("notifications.read", { params: { id: n.id } })}
                  onDone={list.reload}
                  onError={setError}
                />
              ) : (
                `read ${when(n.readAtUtc)}`
              ),
          ],
        ]}
      />
    </Page>
  );
}

export function Flows() {
  const flows = useLoad(() => call("flows.list", { query: { limit: 100 } }));
  const [error, setError] = useState<string | null>(null);
  return (
    <Page title="Flows">
      <Problem text={error ?? flows.error} />
      <Table
        caption="Flows"
        rows={flows.data?.items ?? []}
        empty={flows.loading ? "Loading…" : "No flows."}
        columns={[
          ["Name", (f) => f.name],
          ["On event", (f) => <code>{f.eventName}</code>],
          ["Workspace", (f) => f.workspaceKey ?? "all (platform)"],
          ["Actions", (f) => f.actions.map((a) => a.type).join(", ")],
          ["Active", (f) => (f.isActive ? "yes" : "no")],
          [
            "",
            (f) => (
              <Action
                label={`Delete flow ${f.name}`}
                danger
                allowed={can("flow.manage")}
                run={async () => {
                  if (confirm(`Delete the flow ${f.name}?`))
                    await call("flows.delete", { params: { id: f.id } });
                }}
                onDone={flows.reload}
                onError={setError}
              />
            ),
          ],
        ]}
      />
    </Page>
  );
}

export function Configuration() {
  const effective = useLoad(() => call("config.effective"));
  return (
    <Page title="Configuration">
      <p>Each setting's value in force and where it comes from; secrets are never shown.</p>
      <Problem text={effective.error} />
      <Table
        caption="Settings in force"
        rows={effective.data?.items ?? []}
        empty={effective.loading ? "Loading…" : "No settings."}
        columns={[
          ["Setting", (c) => <code>{c.variable}</code>],
          ["Service", (c) => c.owner],
          ["Value", (c) => (c.secret ? "(secret)" : (c.value ?? "–"))],
          ["From", (c) => c.source],
        ]}
      />
    </Page>
  );
}
