import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, describe, Field, fieldsOf, Page, Problem, Table, useLoad, when } from "../ui.js";

/** Offers `data` as a JSON file to save. */
function download(name: string, data: unknown): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Users: list and create. */
export function Users() {
  const users = useLoad(() => call("users.list", { query: { limit: 100 } }));
  const [error, setError] = useState<string | null>(null);
  return (
    <Page title="Users">
      <Problem text={error ?? users.error} />
      <Table
        caption="Users"
        rows={users.data?.items ?? []}
        empty={users.loading ? "Loading…" : "No users."}
        columns={[
          ["User name", (u) => u.userName],
          ["Id", (u) => <code>{u.id}</code>],
          ["Display name", (u) => u.displayName],
          ["E-mail", (u) => u.email ?? ""],
          ["Platform role", (u) => u.role ?? "–"],
          ["Active", (u) => (u.isActive ? "yes" : "no")],
          ["Created", (u) => when(u.createdAtUtc)],
          [
            "",
            (u) => (
              <Action
                label={`Export ${u.userName}'s data`}
                allowed={can("user.read")}
                run={async () =>
                  download(
                    `${u.userName}-data-export.json`,
                    await call("users.export", { params: { userId: u.id } }),
                  )
                }
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {can("user.create") && (
        <form
          aria-label="New user"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            call("users.create", {
              body: {
                userName: f.userName ?? "",
                password: f.password ?? "",
                ...(f.displayName ? { displayName: f.displayName } : {}),
              },
            }).then(
              () => {
                form.reset();
                setError(null);
                users.reload();
              },
              (err: unknown) => setError(describe(err)),
            );
          }}
        >
          <h2>New user</h2>
          <Field label="User name" name="userName" />
          <Field label="Display name" name="displayName" required={false} />
          <Field label="Password" name="password" type="password" />
          <button type="submit">Create user</button>
        </form>
      )}
    </Page>
  );
}
