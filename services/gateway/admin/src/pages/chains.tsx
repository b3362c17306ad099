import { useState } from "preact/hooks";

import { call } from "../api.js";
import { Action, describe, Page, Problem, Table, useLoad } from "../ui.js";
import { useWorkspaceChoice } from "../workspace-choice.js";

/** A workspace's plugin chain: its order (the first is the primary), additions and removals. */
export function Chains() {
  const { chosen, picker, error: listError } = useWorkspaceChoice();
  const chain = useLoad(
    () => (chosen ? call("assignments.get", { params: { workspaceKey: chosen } }) : Promise.resolve(null)),
    [chosen],
  );
  const plugins = useLoad(() => call("plugins.list").catch(() => []));
  const [error, setError] = useState<string | null>(null);
  const ids = (chain.data?.chain ?? []).map((p) => p.pluginId);
  const save = (next: string[]) =>
    call("assignments.put", { params: { workspaceKey: chosen }, body: { chain: next } }).then(() => {
      setError(null);
      chain.reload();
    });
  const moved = (i: number, by: number) => {
    const next = [...ids];
    const [item] = next.splice(i, 1);
    next.splice(i + by, 0, item as string);
    return next;
  };
  return (
    <Page title="Plugin chains">
      {picker}
      <Problem text={error ?? listError ?? chain.error} />
      <Table
        caption={`The chain of ${chosen} (the first plugin is the primary)`}
        rows={chain.data?.chain ?? []}
        empty={chain.loading ? "Loading…" : "The chain is empty."}
        columns={[
          ["Position", (p) => p.position + 1],
          ["Plugin", (p) => <code>{p.pluginId}</code>],
          ["Version", (p) => p.version],
          ["State", (p) => p.state],
          ["Entitled", (p) => (p.entitled ? "yes" : "no")],
          [
            "",
            (p) => (
              <span class="actions">
                <Action
                  label={`Move ${p.pluginId} up`}
                  allowed={p.position > 0}
                  run={() => save(moved(p.position, -1))}
                  onError={setError}
                />
                <Action
                  label={`Move ${p.pluginId} down`}
                  allowed={p.position < ids.length - 1}
                  run={() => save(moved(p.position, 1))}
                  onError={setError}
                />
                <Action
                  label={`Remove ${p.pluginId}`}
                  danger
                  run={() => save(ids.filter((id) => id !== p.pluginId))}
                  onError={setError}
                />
              </span>
            ),
          ],
        ]}
      />
      <form
        aria-label="Add a plugin to the chain"
        onSubmit={(e) => {
          e.preventDefault();
          const id = new FormData(e.currentTarget).get("pluginId");
          if (typeof id === "string" && id)
            save([...ids, id]).catch((err: unknown) => setError(describe(err)));
        }}
      >
        <label>
          <span>Plugin</span>
          <select name="pluginId">
            {(plugins.data ?? [])
              .filter((p) => !ids.includes(p.pluginId))
              .map((p) => (
                <option key={p.pluginId} value={p.pluginId}>
                  {p.pluginId} ({p.state})
                </option>
              ))}
          </select>
        </label>
        <button type="submit">Add to the end of the chain</button>
      </form>
    </Page>
  );
}
