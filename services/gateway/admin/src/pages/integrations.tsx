import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, Field, KeysField, Page, Problem, ShownOnce, submit, Table, useLoad, when } from "../ui.js";

/**
 * Integrations: machine clients that sign in with a client id and secret (OAuth 2.0 client credentials),
 * each with its keys and, optionally, one workspace. The secret is shown once, when it is made.
 */
export function Integrations() {
  const list = useLoad(() => call("integrations.list"));
  const keys = useLoad(() => call("permissions.list").catch(() => null));
  const [error, setError] = useState<string | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  return (
    <Page title="Integrations">
      <Problem text={error ?? list.error} />
      <ShownOnce what="The new integration's client secret" value={secret} />
      <Table
        caption="Integrations"
        rows={list.data ?? []}
        empty={list.loading ? "Loading…" : "No integrations."}
        columns={[
          ["Name", (i) => i.name],
          ["Client id", (i) => <code>{i.clientId}</code>],
          ["Workspace", (i) => i.workspaceKey ?? "the platform"],
          ["Keys", (i) => i.permissions.join(", ") || "none"],
          ["Made", (i) => when(i.createdAtUtc)],
          [
            "",
            (i) => (
              <Action
                label={`Delete integration ${i.name}`}
                danger
                allowed={can("integration.manage")}
                run={async () => {
                  if (confirm(`Delete ${i.name}? Its tokens stop working.`))
                    await call("integrations.delete", { params: { id: i.id } });
                }}
                onDone={list.reload}
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {can("integration.manage") && (
        <form
          aria-label="New integration"
          onSubmit={submit(async (f, form) => {
            const chosen = new FormData(form).getAll("permissions").map(String);
            const made = await call("integrations.create", {
              body: {
                name: f.name ?? "",
                workspaceKey: f.workspaceKey ? f.workspaceKey : null,
                permissions: chosen,
              },
            });
            setError(null);
            setSecret(made.clientSecret);
            list.reload();
          }, setError)}
        >
          <h2>New integration</h2>
          <Field label="Name" name="name" />
          <Field label="Workspace (empty: the platform)" name="workspaceKey" required={false} />
          <KeysField name="permissions" keys={keys.data ?? []} />
          <button type="submit">Create integration</button>
        </form>
      )}
    </Page>
  );
}
