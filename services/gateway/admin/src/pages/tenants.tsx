import { useEffect, useState } from "preact/hooks";

import type { Body, Reply } from "../api.js";
import { call } from "../api.js";
import { can, session } from "../session.js";
import {
  Action,
  describe,
  Field,
  fieldsOf,
  Page,
  Problem,
  submit,
  Table,
  TextArea,
  useLoad,
  when,
} from "../ui.js";
import { useTenantChoice } from "../workspace-choice.js";

type Workspace = Reply<"workspaces.list">["items"][number];

/** A workspace's hosts, one per line (`shop.example.com` or `example.com/shop`), as bindings. */
const bindingsOf = (text: string) =>
  text
    .split(/\s+/)
    .filter((line) => line.length > 0)
    .map((line) => {
      const slash = line.indexOf("/");
      return slash < 0 ? { host: line } : { host: line.slice(0, slash), pathPrefix: line.slice(slash) };
    });

const hostsOf = (w: Workspace) =>
  w.bindings.map((b) => `${b.host}${b.pathPrefix === "/" ? "" : b.pathPrefix}`);

/** The workspace as PUT takes it back, with `change` applied. */
const putBody = (w: Workspace, change: Partial<Body<"workspaces.put">>): Body<"workspaces.put"> => ({
  tenantKey: w.tenantKey,
  name: w.name,
  accessPolicy: w.accessPolicy,
  ...change,
});

/**
 * Tenants and their workspaces: list, create, suspend and reactivate; a workspace's name, visibility and
 * hosts edited; the hosts a tenant owns.
 */
export function Tenants() {
  const tenants = useLoad(() => call("tenants.list", { query: { limit: 100 } }));
  const workspaces = useLoad(() => call("workspaces.list", { query: { limit: 100 } }));
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState<Workspace | null>(null);
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
          ["State", (w) => (w.isActive ? "active" : "suspended")],
          ["Hosts", (w) => hostsOf(w).join(", ")],
          ["Updated", (w) => when(w.updatedAtUtc)],
          [
            "",
            (w) => (
              <span class="actions">
                <Action
                  label={`Edit ${w.workspaceKey}`}
                  allowed={can("workspace.update")}
                  run={async () => setEditing(w)}
                  onError={setError}
                />
                <Action
                  label={`${w.isActive ? "Suspend" : "Reactivate"} workspace ${w.workspaceKey}`}
                  danger={w.isActive}
                  // Only a platform session may suspend a workspace (a workspace admin's would be refused).
                  allowed={can("workspace.update") && session.get()?.scope === "platform"}
                  run={() =>
                    call("workspaces.put", {
                      params: { workspaceKey: w.workspaceKey },
                      body: putBody(w, { isActive: !w.isActive }),
                    })
                  }
                  onDone={reload}
                  onError={setError}
                />
              </span>
            ),
          ],
        ]}
      />
      {editing !== null && (
        <form
          aria-label="Edit workspace"
          key={editing.workspaceKey + editing.updatedAtUtc}
          onSubmit={submit(async (f) => {
            await call("workspaces.put", {
              params: { workspaceKey: editing.workspaceKey },
              body: putBody(editing, {
                name: f.name ?? editing.name,
                accessPolicy: f.accessPolicy === "Authenticated" ? "Authenticated" : "Public",
                bindings: bindingsOf(f.hosts ?? ""),
              }),
            });
            setEditing(null);
            reload();
          }, setError)}
        >
          <h2>Workspace {editing.workspaceKey}</h2>
          <Field label="Name" name="name" initial={editing.name} />
          <label>
            <span>Visibility</span>
            <select name="accessPolicy">
              <option selected={editing.accessPolicy === "Public"}>Public</option>
              <option selected={editing.accessPolicy === "Authenticated"}>Authenticated</option>
            </select>
          </label>
          <TextArea
            label="Hosts, one per line (host or host/path)"
            name="hosts"
            initial={hostsOf(editing).join("\n")}
          />
          <button type="submit">Save workspace</button>
          <button type="button" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </form>
      )}
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
      {can("tenant.read") && <TenantHosts revision={tenants.data?.items.length ?? 0} />}
    </Page>
  );
}

/** The hosts a tenant owns: no other tenant's workspace may bind them or a name under them. */
function TenantHosts({ revision }: { revision: number }) {
  const { chosen, picker, reload } = useTenantChoice();
  // A tenant created above joins the choice.
  useEffect(() => reload(), [revision]);
  const hosts = useLoad(
    () => (chosen ? call("tenant-hosts.list", { params: { tenantKey: chosen } }) : Promise.resolve(null)),
    [chosen],
  );
  const [error, setError] = useState<string | null>(null);
  const done = () => {
    setError(null);
    hosts.reload();
  };
  return (
    <>
      <h2>Hosts a tenant owns</h2>
      {picker}
      <Problem text={error ?? hosts.error} />
      <Table
        caption={`Hosts of ${chosen}`}
        rows={hosts.data?.items ?? []}
        empty={hosts.loading ? "Loading…" : "This tenant owns no host."}
        columns={[
          ["Host", (h) => <code>{h.host}</code>],
          ["Since", (h) => when(h.createdAtUtc)],
          [
            "",
            (h) => (
              <Action
                label={`Release ${h.host}`}
                danger
                allowed={can("tenant.update")}
                run={() => call("tenant-hosts.delete", { params: { tenantKey: chosen, host: h.host } })}
                onDone={done}
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {can("tenant.update") && chosen && (
        <form
          aria-label="Claim a host"
          onSubmit={submit(async (f) => {
            await call("tenant-hosts.put", { params: { tenantKey: chosen, host: f.host ?? "" } });
            done();
          }, setError)}
        >
          <Field label="Host to claim" name="host" placeholder="example.com" />
          <button type="submit">Claim host</button>
        </form>
      )}
    </>
  );
}
