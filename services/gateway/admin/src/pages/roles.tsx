import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { describe, Field, fieldsOf, KeysField, Page, Problem, Table, useLoad } from "../ui.js";

/** Roles and their keys; a role created or replaced from the key catalogue. */
export function Roles() {
  const roles = useLoad(() => call("roles.list"));
  const keys = useLoad(() => call("permissions.list"));
  const [error, setError] = useState<string | null>(null);
  return (
    <Page title="Roles">
      <Problem text={error ?? roles.error} />
      <Table
        caption="Roles"
        rows={roles.data ?? []}
        empty={roles.loading ? "Loading…" : "No roles."}
        columns={[
          ["Role", (r) => <code>{r.name}</code>],
          ["Scope", (r) => r.scope],
          ["Keys", (r) => r.permissions.join(", ")],
          ["Source", (r) => r.source],
          ["Description", (r) => r.description],
        ]}
      />
      {can("role.update") && (
        <form
          aria-label="Role"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            const chosen = new FormData(form)
              .getAll("keys")
              .filter((k): k is string => typeof k === "string");
            call("roles.put", {
              params: { role: f.role ?? "" },
              body: {
                permissions: chosen,
                scope: f.scope === "platform" ? "platform" : "workspace",
                ...(f.description ? { description: f.description } : {}),
              },
            }).then(
              () => {
                form.reset();
                setError(null);
                roles.reload();
              },
              (err: unknown) => setError(describe(err)),
            );
          }}
        >
          <h2>Create or replace a role (its holders sign in again)</h2>
          <Field label="Role name" name="role" />
          <Field label="Description" name="description" required={false} />
          <label>
            <span>Scope</span>
            <select name="scope">
              <option value="workspace">workspace</option>
              <option value="platform">platform</option>
            </select>
          </label>
          <KeysField name="keys" keys={keys.data ?? []} />
          <button type="submit">Save role</button>
        </form>
      )}
    </Page>
  );
}
