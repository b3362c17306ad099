import { useState } from "preact/hooks";

import { call } from "../api.js";
import { followExtensions } from "../extensions.js";
import { can } from "../session.js";
import { Action, describe, Field, Page, Problem, submit, Table, useLoad, when } from "../ui.js";
import { Trust } from "./trust.js";

const TYPES: Record<string, string> = { zip: "application/zip", tar: "application/x-tar" };

const typeOf = (file: File) => TYPES[file.name.split(".").pop()?.toLowerCase() ?? ""] ?? "application/gzip";

/**
 * Installed plugins: install a package (file picker, drag-and-drop, or from the feed), update one (an
 * uploaded package or a feed version), activate, deactivate, uninstall.
 */
export function Plugins() {
  const plugins = useLoad(() => call("plugins.list"));
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [over, setOver] = useState(false);
  // A lifecycle move changes the plugins' admin pages too.
  const [revision, setRevision] = useState(0);
  const changed = () => {
    plugins.reload();
    setRevision((r) => r + 1);
    void followExtensions();
  };

  const upload = (file: File) => {
    setError(null);
    setNote(`Installing ${file.name}…`);
    call("plugins.install", { body: file, contentType: typeOf(file) }).then(
      (p) => {
        setNote(
          `Installed ${p.pluginId} ${p.version} (${p.signed ? `signed by ${p.publisherId ?? "?"}` : "unsigned"}).`,
        );
        changed();
      },
      (err: unknown) => {
        setNote(null);
        setError(describe(err));
      },
    );
  };

  return (
    <Page title="Plugins">
      {can("plugin.create") && (
        <div
          class={over ? "drop over" : "drop"}
          onDragOver={(e) => {
            e.preventDefault();
            setOver(true);
          }}
          onDragLeave={() => setOver(false)}
          onDrop={(e) => {
            e.preventDefault();
            setOver(false);
            const file = e.dataTransfer?.files[0];
            if (file) upload(file);
          }}
        >
          <label>
            <span>Install a package (.tgz, .tar or .zip): choose it or drop it here</span>
            <input
              type="file"
              name="package"
              accept=".tgz,.gz,.tar,.zip"
              onChange={(e) => {
                const file = e.currentTarget.files?.[0];
                if (file) upload(file);
                e.currentTarget.value = "";
              }}
            />
          </label>
        </div>
      )}
      <p role="status">{note}</p>
      <Problem text={error ?? plugins.error} />
      <Table
        caption="Installed plugins"
        rows={plugins.data ?? []}
        empty={plugins.loading ? "Loading…" : "No plugins installed."}
        columns={[
          ["Plugin", (p) => <code>{p.pluginId}</code>],
          ["Name", (p) => p.name],
          ["Version", (p) => p.version],
          ["State", (p) => (p.state === "failed" ? `failed: ${p.failureReason ?? ""}` : p.state)],
          ["Signer", (p) => (p.signed ? (p.publisherId ?? p.signerFingerprint ?? "") : "unsigned")],
          ["Updated", (p) => when(p.updatedAtUtc)],
          [
            "",
            (p) => (
              <span class="actions">
                {p.state === "active" ? (
                  <Action
                    label={`Deactivate ${p.pluginId}`}
                    allowed={can("plugin.execute")}
                    run={() => call("plugins.deactivate", { params: { id: p.pluginId } })}
                    onDone={changed}
                    onError={setError}
                  />
                ) : (
                  <Action
                    label={`Activate ${p.pluginId}`}
                    allowed={can("plugin.execute")}
                    run={() => call("plugins.activate", { params: { id: p.pluginId } })}
                    onDone={changed}
                    onError={setError}
                  />
                )}
                <Action
                  label={`Uninstall ${p.pluginId}`}
                  danger
                  allowed={can("plugin.delete")}
                  run={async () => {
                    if (confirm(`Uninstall ${p.pluginId}? It leaves every workspace's chain.`)) {
                      await call("plugins.uninstall", { params: { id: p.pluginId } });
                    }
                  }}
                  onDone={changed}
                  onError={setError}
                />
              </span>
            ),
          ],
        ]}
      />
      {can("plugin.create") && (
        <>
          <form
            aria-label="Install from the feed"
            onSubmit={submit(async (f) => {
              setError(null);
              const p = await call("plugins.install-feed", {
                body: { packageId: f.packageId ?? "", version: f.version ?? "" },
              });
              setNote(`Installed ${p.pluginId} ${p.version} from the feed.`);
              changed();
            }, setError)}
          >
            <h2>Install from the feed</h2>
            <Field label="Package id" name="packageId" placeholder="hello" />
            <Field label="Version" name="version" placeholder="1.2.0" />
            <button type="submit">Install from the feed</button>
          </form>
          <form
            aria-label="Update a plugin"
            onSubmit={submit(async (f, form) => {
              setError(null);
              const id = f.pluginId ?? "";
              const query = { allowDowngrade: f.allowDowngrade === "on" };
              const file = (form.elements.namedItem("package") as HTMLInputElement | null)?.files?.[0];
              const p = file
                ? await call("plugins.update-upload", {
                    params: { id },
                    query,
                    body: file,
                    contentType: typeOf(file),
                  })
                : await call("plugins.update-feed", {
                    params: { id },
                    query,
                    body: { packageId: id, version: f.version ?? "" },
                  });
              setNote(`Updated ${p.pluginId} to ${p.version}.`);
              changed();
            }, setError)}
          >
            <h2>Update a plugin</h2>
            <label>
              <span>Plugin</span>
              <select name="pluginId">
                {(plugins.data ?? []).map((p) => (
                  <option key={p.pluginId} value={p.pluginId}>
                    {p.pluginId} {p.version}
                  </option>
                ))}
              </select>
            </label>
            <label>
              <span>New package (or leave empty and give a feed version)</span>
              <input type="file" name="package" accept=".tgz,.gz,.tar,.zip" />
            </label>
            <Field label="Feed version" name="version" required={false} placeholder="1.2.0" />
            <label class="inline">
              <input type="checkbox" name="allowDowngrade" />
              <span>Allow a lower version</span>
            </label>
            <button type="submit">Update</button>
          </form>
        </>
      )}
      <Trust revision={revision} />
    </Page>
  );
}
