import { useState } from "preact/hooks";

import { call } from "../api.js";
import { followExtensions } from "../extensions.js";
import { can } from "../session.js";
import { Action, describe, Page, Problem, Table, useLoad, when } from "../ui.js";
import { Trust } from "./trust.js";

const TYPES: Record<string, string> = { zip: "application/zip", tar: "application/x-tar" };

/** Installed plugins: upload a package (file picker or drag-and-drop), activate, deactivate, uninstall. */
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
    const ext = file.name.split(".").pop()?.toLowerCase() ?? "";
    call("plugins.install", { body: file, contentType: TYPES[ext] ?? "application/gzip" }).then(
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
      <Trust revision={revision} />
    </Page>
  );
}
