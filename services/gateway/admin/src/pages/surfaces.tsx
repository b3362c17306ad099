import { useState } from "preact/hooks";

import { type Body, call } from "../api.js";
import { can } from "../session.js";
import { Action, Field, Page, Problem, submit, Table, TextArea, useLoad, when } from "../ui.js";
import { useWorkspaceChoice } from "../workspace-choice.js";

const EXAMPLE_ROOT = JSON.stringify(
  {
    key: "home",
    title: "Home",
    path: "",
    children: [{ key: "about", title: "About", path: "about" }],
  },
  null,
  2,
);

/** The navigation tree, written as JSON; a parse failure is the operator's to fix, said plainly. */
function rootOf(text: string): Body<"surfaces.put">["applicationRoot"] {
  try {
    return JSON.parse(text) as Body<"surfaces.put">["applicationRoot"];
  } catch (error) {
    throw new Error(`The navigation tree is not JSON: ${(error as Error).message}`);
  }
}

/** A workspace's surfaces (their navigation trees) and snippets (text blocks its pages include). */
export function Surfaces() {
  const { chosen, picker, error: listError } = useWorkspaceChoice();
  const query = { workspaceKey: chosen };
  const surfaces = useLoad(
    () => (chosen ? call("surfaces.list", { query }) : Promise.resolve(null)),
    [chosen],
  );
  const snippets = useLoad(
    () => (chosen && can("snippet.read") ? call("snippets.list", { query }) : Promise.resolve(null)),
    [chosen],
  );
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState<{ key: string; name: string; root: string } | null>(null);
  const done = () => {
    setError(null);
    setEditing(null);
    surfaces.reload();
    snippets.reload();
  };
  return (
    <Page title="Surfaces and snippets">
      {picker}
      <Problem text={error ?? listError ?? surfaces.error} />
      <Table
        caption={`Surfaces of ${chosen}`}
        rows={surfaces.data?.items ?? []}
        empty={surfaces.loading ? "Loading…" : "This workspace has no surface."}
        columns={[
          ["Surface", (s) => <code>{s.surfaceKey}</code>],
          ["Name", (s) => s.name],
          ["Updated", (s) => when(s.updatedAtUtc)],
          [
            "",
            (s) => (
              <span class="actions">
                <Action
                  label={`Edit surface ${s.surfaceKey}`}
                  allowed={can("workspace.update")}
                  run={async () =>
                    setEditing({
                      key: s.surfaceKey,
                      name: s.name,
                      root: JSON.stringify(s.applicationRoot, null, 2),
                    })
                  }
                  onError={setError}
                />
                <Action
                  label={`Delete surface ${s.surfaceKey}`}
                  danger
                  allowed={can("workspace.update")}
                  run={async () => {
                    if (confirm(`Delete the surface ${s.surfaceKey}?`))
                      await call("surfaces.delete", { params: { surfaceKey: s.surfaceKey }, query });
                  }}
                  onDone={done}
                  onError={setError}
                />
              </span>
            ),
          ],
        ]}
      />
      {can("workspace.update") && chosen && (
        <form
          aria-label="Surface"
          key={editing?.key ?? "new"}
          onSubmit={submit(async (f) => {
            await call("surfaces.put", {
              params: { surfaceKey: f.surfaceKey ?? "" },
              query,
              body: { name: f.name ?? "", applicationRoot: rootOf(f.root ?? "") },
            });
            done();
          }, setError)}
        >
          <h2>{editing ? `Surface ${editing.key}` : "New surface"}</h2>
          <Field label="Surface key" name="surfaceKey" initial={editing?.key} placeholder="main" />
          <Field label="Name" name="name" initial={editing?.name} />
          <TextArea
            label="Navigation tree (JSON: key, title, path, visible, order, children)"
            name="root"
            rows={10}
            required
            initial={editing?.root ?? EXAMPLE_ROOT}
          />
          <button type="submit">Save surface</button>
          {editing && (
            <button type="button" onClick={() => setEditing(null)}>
              Cancel
            </button>
          )}
        </form>
      )}

      <h2>Snippets</h2>
      <Problem text={snippets.error} />
      <Table
        caption={`Snippets of ${chosen}`}
        rows={snippets.data?.items ?? []}
        empty={snippets.loading ? "Loading…" : "This workspace has no snippet."}
        columns={[
          ["Snippet", (s) => <code>{s.snippetKey}</code>],
          ["Type", (s) => s.contentType],
          ["Content", (s) => (s.content.length > 120 ? `${s.content.slice(0, 120)}…` : s.content)],
          ["Updated", (s) => when(s.updatedAtUtc)],
          [
            "",
            (s) => (
              <Action
                label={`Delete snippet ${s.snippetKey}`}
                danger
                allowed={can("snippet.update")}
                run={() => call("snippets.delete", { params: { snippetKey: s.snippetKey }, query })}
                onDone={done}
                onError={setError}
              />
            ),
          ],
        ]}
      />
      {can("snippet.update") && chosen && (
        <form
          aria-label="Snippet"
          onSubmit={submit(async (f) => {
            await call("snippets.put", {
              params: { snippetKey: f.snippetKey ?? "" },
              query,
              body: {
                content: f.content ?? "",
                contentType: f.contentType === "text/html" ? "text/html" : "text/plain",
              },
            });
            done();
          }, setError)}
        >
          <h2>Save a snippet</h2>
          <Field label="Snippet key" name="snippetKey" placeholder="footer" />
          <label>
            <span>Content type</span>
            <select name="contentType">
              <option>text/plain</option>
              <option>text/html</option>
            </select>
          </label>
          <TextArea label="Content" name="content" required />
          <button type="submit">Save snippet</button>
        </form>
      )}
    </Page>
  );
}
