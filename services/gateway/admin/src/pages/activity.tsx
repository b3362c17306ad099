import { useState } from "preact/hooks";

import { type Body, call, type Reply } from "../api.js";
import { can } from "../session.js";
import { Action, Field, Page, Problem, submit, Table, useLoad, when } from "../ui.js";

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

type FlowView = Reply<"flows.list">["items"][number];
type FlowAction = Body<"flows.create">["actions"][number];

/** An action in the editor: every type's fields, the chosen type's sent. */
interface Draft {
  type: "http" | "publish" | "notify";
  url: string;
  secret: string;
  hasSecret: boolean;
  includeSensitiveData: boolean;
  eventName: string;
  data: string;
  title: string;
  detail: string;
  permission: string;
}

const blank = (type: Draft["type"] = "notify"): Draft => ({
  type,
  url: "",
  secret: "",
  hasSecret: false,
  includeSensitiveData: false,
  eventName: "",
  data: "",
  title: "",
  detail: "",
  permission: "",
});

const draftOf = (a: FlowView["actions"][number]): Draft =>
  a.type === "http"
    ? { ...blank("http"), url: a.url, hasSecret: a.hasSecret, includeSensitiveData: a.includeSensitiveData }
    : a.type === "publish"
      ? { ...blank("publish"), eventName: a.eventName, data: a.data ? JSON.stringify(a.data) : "" }
      : { ...blank("notify"), title: a.title, detail: a.detail ?? "", permission: a.permission };

function actionOf(d: Draft, i: number): FlowAction {
  if (d.type === "http") {
    return {
      type: "http",
      url: d.url,
      includeSensitiveData: d.includeSensitiveData,
      // Left empty on an edit, the stored secret is kept.
      ...(d.secret ? { secret: d.secret } : {}),
    };
  }
  if (d.type === "publish") {
    let data: Record<string, unknown> | undefined;
    try {
      data = d.data.trim() ? (JSON.parse(d.data) as Record<string, unknown>) : undefined;
    } catch (error) {
      throw new Error(`Action ${i + 1}: the data is not JSON (${(error as Error).message})`);
    }
    return { type: "publish", eventName: d.eventName, ...(data ? { data } : {}) };
  }
  return {
    type: "notify",
    title: d.title,
    ...(d.detail ? { detail: d.detail } : {}),
    ...(d.permission ? { permission: d.permission } : {}),
  };
}

/** The fields of one action, by its type. */
function ActionEditor({
  draft,
  index,
  change,
  remove,
}: {
  draft: Draft;
  index: number;
  change: (d: Draft) => void;
  remove?: () => void;
}) {
  const text = (
    label: string,
    key: "url" | "secret" | "eventName" | "data" | "title" | "detail" | "permission",
    required = false,
    placeholder?: string,
  ) => (
    <label>
      <span>{label}</span>
      <input
        type="text"
        required={required}
        placeholder={placeholder}
        value={draft[key]}
        onInput={(e) => change({ ...draft, [key]: e.currentTarget.value })}
      />
    </label>
  );
  return (
    <fieldset>
      <legend>Action {index + 1}</legend>
      <label>
        <span>Type</span>
        <select
          value={draft.type}
          onChange={(e) => change({ ...draft, type: e.currentTarget.value as Draft["type"] })}
        >
          <option value="notify">notify the operators</option>
          <option value="http">call a URL (signed POST)</option>
          <option value="publish">publish an event</option>
        </select>
      </label>
      {draft.type === "http" && (
        <>
          {text("URL", "url", true, "https://hooks.example.com/flow")}
          {text(draft.hasSecret ? "Secret (empty: keep the stored one)" : "Secret (optional)", "secret")}
          <label class="inline">
            <input
              type="checkbox"
              checked={draft.includeSensitiveData}
              onChange={(e) => change({ ...draft, includeSensitiveData: e.currentTarget.checked })}
            />
            <span>Include sensitive fields</span>
          </label>
        </>
      )}
      {draft.type === "publish" && (
        <>
          {text("Event to publish", "eventName", true, "orders.flagged")}
          {text("Data (JSON object, optional)", "data", false, '{"reason": "flagged"}')}
        </>
      )}
      {draft.type === "notify" && (
        <>
          {text("Title", "title", true)}
          {text("Detail (optional)", "detail")}
          {text("Only for holders of the key (optional)", "permission", false, "flow.read")}
        </>
      )}
      {remove && (
        <button type="button" class="danger" onClick={remove}>
          Remove action {index + 1}
        </button>
      )}
    </fieldset>
  );
}

/** Flows: each one listed, created or edited (its event, workspace and actions), deleted. */
export function Flows() {
  const flows = useLoad(() => call("flows.list", { query: { limit: 100 } }));
  const catalog = useLoad(() => call("events.catalog").catch(() => []));
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState<FlowView | null>(null);
  const [drafts, setDrafts] = useState<Draft[]>([blank()]);
  const edit = (f: FlowView | null) => {
    setEditing(f);
    setDrafts(f ? f.actions.map(draftOf) : [blank()]);
  };
  const done = () => {
    setError(null);
    edit(null);
    flows.reload();
  };
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
              <span class="actions">
                <Action
                  label={`Edit flow ${f.name}`}
                  allowed={can("flow.manage")}
                  run={async () => edit(f)}
                  onError={setError}
                />
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
              </span>
            ),
          ],
        ]}
      />
      {can("flow.manage") && (
        <form
          aria-label="Flow"
          key={editing?.id ?? "new"}
          onSubmit={submit(async (f) => {
            const body = {
              name: f.name ?? "",
              eventName: f.eventName ?? "",
              workspaceKey: f.workspaceKey ? f.workspaceKey : null,
              isActive: f.isActive === "on",
              actions: drafts.map(actionOf),
            };
            if (editing) await call("flows.put", { params: { id: editing.id }, body });
            else await call("flows.create", { body });
            done();
          }, setError)}
        >
          <h2>{editing ? `Flow ${editing.name}` : "New flow"}</h2>
          <Field label="Name" name="name" initial={editing?.name} />
          <Field
            label="On event (a name, or a prefix ending in *)"
            name="eventName"
            list="flow-events"
            initial={editing?.eventName}
          />
          <datalist id="flow-events">
            {(catalog.data ?? []).map((e) => (
              <option key={e.eventName} value={e.eventName} />
            ))}
          </datalist>
          <Field
            label="Workspace (empty: every workspace)"
            name="workspaceKey"
            required={false}
            initial={editing?.workspaceKey ?? ""}
          />
          <label class="inline">
            <input type="checkbox" name="isActive" defaultChecked={editing?.isActive ?? true} />
            <span>Active</span>
          </label>
          {drafts.map((d, i) => (
            <ActionEditor
              key={i}
              draft={d}
              index={i}
              change={(next) => setDrafts(drafts.map((x, j) => (j === i ? next : x)))}
              {...(drafts.length > 1 ? { remove: () => setDrafts(drafts.filter((_, j) => j !== i)) } : {})}
            />
          ))}
          {drafts.length < 10 && (
            <button type="button" onClick={() => setDrafts([...drafts, blank()])}>
              Add an action
            </button>
          )}
          <button type="submit">{editing ? "Save flow" : "Create flow"}</button>
          {editing && (
            <button type="button" onClick={() => edit(null)}>
              Cancel
            </button>
          )}
        </form>
      )}
    </Page>
  );
}

/**
 * Each setting's value in force and where it comes from; the settings that can change at run time
 * changed (stored for every replica) or given back to the environment's value or the default.
 */
export function Configuration() {
  const effective = useLoad(() => call("config.effective"));
  const definitions = useLoad(() => call("config.definitions"));
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const changeable = new Map(
    (definitions.data?.items ?? []).filter((d) => d.changeable && !d.secret).map((d) => [d.variable, d]),
  );
  const store = (variable: string, value: string | null) =>
    call("config.put", { body: { values: { [variable]: value } } }).then(() => {
      setError(null);
      setSaved(value === null ? `${variable} is back to its default.` : `${variable} is now ${value}.`);
      effective.reload();
    });
  return (
    <Page title="Configuration">
      <p>Each setting's value in force and where it comes from; secrets are never shown.</p>
      <Problem text={error ?? effective.error} />
      <p role="status">{saved}</p>
      <Table
        caption="Settings in force"
        rows={effective.data?.items ?? []}
        empty={effective.loading ? "Loading…" : "No settings."}
        columns={[
          ["Setting", (c) => <code>{c.variable}</code>],
          ["Service", (c) => c.owner],
          ["Value", (c) => (c.secret ? "(secret)" : (c.value ?? "–"))],
          ["From", (c) => c.source],
          [
            "",
            (c) =>
              c.source === "stored" && changeable.has(c.variable) ? (
                <Action
                  label={`Reset ${c.variable}`}
                  allowed={can("config.update")}
                  run={() => store(c.variable, null)}
                  onError={setError}
                />
              ) : (
                ""
              ),
          ],
        ]}
      />
      {can("config.update") && changeable.size > 0 && (
        <form
          aria-label="Change a setting"
          onSubmit={submit((f) => store(f.variable ?? "", f.value ?? ""), setError)}
        >
          <h2>Change a setting at run time</h2>
          <p>Every replica of its service takes the new value; a restart keeps it.</p>
          <label>
            <span>Setting</span>
            <select name="variable">
              {[...changeable.values()].map((d) => (
                <option key={d.variable} value={d.variable}>
                  {d.variable} ({d.type}, default {d.defaultText || "none"})
                </option>
              ))}
            </select>
          </label>
          <Field label="New value" name="value" />
          <button type="submit">Store value</button>
        </form>
      )}
    </Page>
  );
}
