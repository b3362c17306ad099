import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, describe, Field, fieldsOf, Page, Problem, Table, useLoad, when } from "../ui.js";

/** Tenants and their workspaces: list, create, suspend and reactivate. */
export function Tenants() {
  const tenants = useLoad(() => call("tenants.list", { query: { limit: 100 } }));
  const workspaces = useLoad(() => call("workspaces.list", { query: { limit: 100 } }));
  const [error, setError] = useState<string | null>(null);
  const reload = () => {
    setError(null);
    tenants.reload();
    workspaces.reload();
  };
  return (
    <Page title="Tenants and workspaces">
      <Problem text={error ?? tenants.error} />
      <Table
        caption="Tenants"
        rows={tenants.data?.items ?? []}
        empty={tenants.loading ? "Loading…" : "No tenants."}
        columns={[
          ["Key", (t) => <code>{t.tenantKey}</code>],
          ["Name", (t) => t.name],
          ["State", (t) => t.state],
          ["Workspaces", (t) => t.workspaceCount],
          [
            "",
            (t) =>
              t.state === "active" ? (
                <Action
                  label={`Suspend ${t.tenantKey}`}
                  danger
                  allowed={can("tenant.update")}
                  run={() => call("tenants.suspend", { params: { tenantKey: t.tenantKey } })}
                  onDone={reload}
                  onError={setError}
                />
              ) : (
                <Action
                  label={`Reactivate ${t.tenantKey}`}
                  allowed={can("tenant.update")}
                  run={() => call("tenants.activate", { params: { tenantKey: t.tenantKey } })}
                  onDone={reload}
                  onError={setError}
                />
              ),
          ],
        ]}
      />
      {can("tenant.create") && (
        <form
          aria-label="New tenant"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            call("tenants.create", { body: { tenantKey: f.tenantKey ?? "", name: f.name ?? "" } }).then(
              () => {
                form.reset();
                reload();
              },
              (err: unknown) => setError(describe(err)),
            );
          }}
        >
          <h2>New tenant</h2>
          <Field label="Tenant key" name="tenantKey" />
          <Field label="Name" name="name" />
          <button type="submit">Create tenant</button>
        </form>
      )}
      <Problem text={workspaces.error} />
      <Table
        caption="Workspaces"
        rows={workspaces.data?.items ?? []}
        empty={workspaces.loading ? "Loading…" : "No workspaces."}
        columns={[
          ["Key", (w) => <code>{w.workspaceKey}</code>],
          ["Tenant", (w) => w.tenantKey],
          ["Name", (w) => w.name],
          ["Visibility", (w) => w.accessPolicy],
          [
            "Hosts",
            (w) => w.bindings.map((b) => `${b.host}${b.pathPrefix === "/" ? "" : b.pathPrefix}`).join(", "),
          ],
          ["Updated", (w) => when(w.updatedAtUtc)],
        ]}
      />
      {can("workspace.update") && (
        <form
          aria-label="New workspace"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            call("workspaces.put", {
              params: { workspaceKey: f.workspaceKey ?? "" },
              body: {
                tenantKey: f.tenantKey ?? "",
                name: f.name ?? "",
                accessPolicy: f.accessPolicy === "Authenticated" ? "Authenticated" : "Public",
                ...(f.host ? { bindings: [{ host: f.host }] } : {}),
              },
            }).then(
              () => {
                form.reset();
                reload();
              },
              (err: unknown) => setError(describe(err)),
            );
          }}
        >
          <h2>New workspace</h2>
          <Field label="Workspace key" name="workspaceKey" />
          <Field label="Tenant key" name="tenantKey" />
          <Field label="Name" name="name" />
          <Field label="Host (optional)" name="host" required={false} placeholder="shop.example.com" />
          <label>
            <span>Visibility</span>
            <select name="accessPolicy">
              <option>Public</option>
              <option>Authenticated</option>
            </select>
          </label>
          <button type="submit">Create workspace</button>
        </form>
      )}
    </Page>
  );
}
