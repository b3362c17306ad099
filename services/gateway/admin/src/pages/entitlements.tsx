import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, describe, Field, fieldsOf, Page, Problem, submit, Table, useLoad, when } from "../ui.js";
import { useTenantChoice } from "../workspace-choice.js";

/**
 * Which tenants and workspaces may use which plugins: the grants, granting and withdrawing; and the
 * plugins delegated to a tenant (its workspace admins may put them in their own chains).
 */
export function Entitlements() {
  const grants = useLoad(() => call("entitlements.list", { query: { limit: 100 } }));
  const [error, setError] = useState<string | null>(null);
  const done = () => {
    setError(null);
    grants.reload();
  };
  return (
    <Page title="Entitlements">
      <Problem text={error ?? grants.error} />
      <Table
        caption="Grants"
        rows={grants.data?.items ?? []}
        empty={grants.loading ? "Loading…" : "No grants."}
        columns={[
          ["Plugin", (g) => <code>{g.pluginId}</code>],
          [
            "To",
            (g) => (g.workspaceKey === null ? `tenant ${g.tenantKey ?? ""}` : `workspace ${g.workspaceKey}`),
          ],
          ["Source", (g) => g.source],
          ["Until", (g) => (g.expiresAtUtc === null ? "no end" : when(g.expiresAtUtc))],
          [
            "",
            (g) => (
              <Action
                label={`Withdraw ${g.pluginId} from ${g.workspaceKey ?? g.tenantKey ?? ""}`}
                danger
                allowed={can("plugin.execute")}
                run={() =>
                  call("entitlements.put", {
                    body: {
                      items: [
                        {
                          pluginId: g.pluginId,
                          entitled: false,
                          ...(g.workspaceKey === null
                            ? { tenantKey: g.tenantKey ?? "" }
                            : { workspaceKey: g.workspaceKey }),
                        },
                      ],
                    },
                  })
                }
                onDone={done}
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {can("plugin.execute") && (
        <form
          aria-label="Grant"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            const to = f.to ?? "";
            call("entitlements.put", {
              body: {
                items: [
                  {
                    pluginId: f.pluginId ?? "",
                    entitled: true,
                    ...(f.kind === "workspace" ? { workspaceKey: to } : { tenantKey: to }),
                  },
                ],
              },
            }).then(
              () => {
                form.reset();
                done();
              },
              (err: unknown) => setError(describe(err)),
            );
          }}
        >
          <h2>Grant a plugin</h2>
          <Field label="Plugin" name="pluginId" />
          <label>
            <span>To a</span>
            <select name="kind">
              <option value="tenant">tenant (all its workspaces)</option>
              <option value="workspace">workspace</option>
            </select>
          </label>
          <Field label="Tenant or workspace key" name="to" />
          <button type="submit">Grant</button>
        </form>
      )}
      {can("plugin.assign") && <Delegations />}
    </Page>
  );
}

function Delegations() {
  const { chosen, picker } = useTenantChoice();
  const list = useLoad(
    () => (chosen ? call("delegations.list", { params: { tenantKey: chosen } }) : Promise.resolve(null)),
    [chosen],
  );
  const [error, setError] = useState<string | null>(null);
  const delegate = (pluginId: string, delegated: boolean) =>
    call("delegations.put", { params: { tenantKey: chosen, pluginId }, body: { delegated } }).then(() => {
      setError(null);
      list.reload();
    });
  return (
    <>
      <h2>Delegations</h2>
      <p>A plugin delegated to a tenant may be put in its workspaces' chains by their own admins.</p>
      {picker}
      <Problem text={error ?? list.error} />
      <Table
        caption={`Plugins delegated to ${chosen}`}
        rows={(list.data?.items ?? []).filter((d) => d.delegated)}
        empty={list.loading ? "Loading…" : "Nothing is delegated to this tenant."}
        columns={[
          ["Plugin", (d) => <code>{d.pluginId}</code>],
          ["By", (d) => d.delegatedBy ?? "–"],
          ["Since", (d) => when(d.delegatedAtUtc)],
          [
            "",
            (d) => (
              <Action
                label={`Take ${d.pluginId} back from ${chosen}`}
                danger
                run={() => delegate(d.pluginId, false)}
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {chosen && (
        <form aria-label="Delegate" onSubmit={submit((f) => delegate(f.pluginId ?? "", true), setError)}>
          <Field label="Plugin to delegate" name="pluginId" />
          <button type="submit">Delegate to {chosen}</button>
        </form>
      )}
    </>
  );
}
