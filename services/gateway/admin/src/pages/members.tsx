import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, describe, Field, fieldsOf, Page, Problem, Table, useLoad } from "../ui.js";
import { useWorkspaceChoice } from "../workspace-choice.js";

const roleList = (text: string) =>
  text
    .split(",")
    .map((r) => r.trim())
    .filter((r) => r.length > 0);

/** A workspace's members and their roles in it: add, change roles, remove. */
export function Members() {
  const { chosen, picker, error: listError } = useWorkspaceChoice();
  const members = useLoad(
    () =>
      chosen
        ? call("members.list", { params: { workspaceKey: chosen }, query: { limit: 100 } })
        : Promise.resolve(null),
    [chosen],
  );
  const [error, setError] = useState<string | null>(null);
  const done = () => {
    setError(null);
    members.reload();
  };
  const mayChange = can("membership.update") || can("workspace.update");
  return (
    <Page title="Members">
      {picker}
      <Problem text={error ?? listError ?? members.error} />
      <Table
        caption={`Members of ${chosen}`}
        rows={members.data?.items ?? []}
        empty={members.loading ? "Loading…" : "No members."}
        columns={[
          ["User", (m) => m.userName],
          ["Display name", (m) => m.displayName],
          ["Roles here", (m) => m.roles.join(", ") || "–"],
          [
            "",
            (m) => (
              <Action
                label={`Remove ${m.userName}`}
                danger
                allowed={can("membership.delete") || can("workspace.update")}
                run={() => call("members.delete", { params: { workspaceKey: chosen, userId: m.id } })}
                onDone={done}
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {mayChange && (
        <form
          aria-label="Member"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            const userId = f.userId ?? "";
            call("members.put", { params: { workspaceKey: chosen, userId } })
              .then(() =>
                call("member-roles.put", {
                  params: { workspaceKey: chosen, userId },
                  body: { roles: roleList(f.roles ?? "") },
                }),
              )
              .then(
                () => {
                  form.reset();
                  done();
                },
                (err: unknown) => setError(describe(err)),
              );
          }}
        >
          <h2>Add a member or set a member's roles</h2>
          <Field label="User id" name="userId" placeholder="the id the Users page shows" />
          <Field label="Roles here (comma-separated)" name="roles" required={false} placeholder="admin" />
          <button type="submit">Save member</button>
        </form>
      )}
    </Page>
  );
}
