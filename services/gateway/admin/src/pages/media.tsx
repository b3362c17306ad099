import { useState } from "preact/hooks";

import { call, sessionFetch } from "../api.js";
import { can } from "../session.js";
import { Action, describe, Page, Problem, Table, useLoad, when } from "../ui.js";
import { useWorkspaceChoice } from "../workspace-choice.js";

const size = (bytes: number) =>
  bytes < 1024
    ? `${bytes} B`
    : bytes < 1048576
      ? `${(bytes / 1024).toFixed(1)} KB`
      : `${(bytes / 1048576).toFixed(1)} MB`;

/** The file's bytes through the session (the token is not in the address), saved under its name. */
async function download(id: string, fileName: string): Promise<void> {
  const response = await sessionFetch(`/api/media/${encodeURIComponent(id)}/content`);
  if (!response.ok) throw new Error(`the download answered ${response.status}`);
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = fileName;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A workspace's media library: files listed page by page, uploaded, downloaded, deleted. */
export function Media() {
  const { chosen, picker, error: listError } = useWorkspaceChoice();
  // The cursors of the pages before this one, for the workspace they belong to: another workspace starts
  // at its first page.
  const [paging, setPaging] = useState<{ workspace: string; cursors: string[] }>({
    workspace: "",
    cursors: [],
  });
  const cursors = paging.workspace === chosen ? paging.cursors : [];
  const cursor = cursors.at(-1);
  const list = useLoad(
    () =>
      chosen
        ? call("media.list", { query: { workspaceKey: chosen, limit: 50, ...(cursor ? { cursor } : {}) } })
        : Promise.resolve(null),
    [chosen, cursor],
  );
  const [error, setError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const upload = (file: File) => {
    setError(null);
    setNote(`Uploading ${file.name}…`);
    const form = new FormData();
    form.append("file", file, file.name);
    call("media.upload", { query: { workspaceKey: chosen }, body: form }).then(
      (m) => {
        setNote(`Uploaded ${m.fileName} (${size(m.size)}).`);
        setPaging({ workspace: chosen, cursors: [] });
        list.reload();
      },
      (err: unknown) => {
        setNote(null);
        setError(describe(err));
      },
    );
  };
  return (
    <Page title="Media">
      {picker}
      {can("media.manage") && chosen && (
        <label>
          <span>Upload a file to {chosen}</span>
          <input
            type="file"
            name="file"
            onChange={(e) => {
              const file = e.currentTarget.files?.[0];
              if (file) upload(file);
              e.currentTarget.value = "";
            }}
          />
        </label>
      )}
      <p role="status">{note}</p>
      <Problem text={error ?? listError ?? list.error} />
      <Table
        caption={`Files of ${chosen}, newest first`}
        rows={list.data?.items ?? []}
        empty={list.loading ? "Loading…" : "No files."}
        columns={[
          ["File", (m) => m.fileName],
          ["Type", (m) => m.contentType],
          ["Size", (m) => size(m.size)],
          ["By", (m) => m.uploadedBy],
          ["Uploaded", (m) => when(m.createdAtUtc)],
          [
            "",
            (m) => (
              <span class="actions">
                <Action
                  label={`Download ${m.fileName}`}
                  run={() => download(m.id, m.fileName)}
                  onError={setError}
                />
                <Action
                  label={`Delete ${m.fileName}`}
                  danger
                  allowed={can("media.manage")}
                  run={async () => {
                    if (confirm(`Delete ${m.fileName}?`))
                      await call("media.delete", { params: { id: m.id } });
                  }}
                  onDone={list.reload}
                  onError={setError}
                />
              </span>
            ),
          ],
        ]}
      />
      <nav aria-label="Pages of files" class="pager">
        <button
          type="button"
          disabled={cursors.length === 0}
          onClick={() => setPaging({ workspace: chosen, cursors: cursors.slice(0, -1) })}
        >
          Newer files
        </button>
        <button
          type="button"
          disabled={!list.data?.nextCursor}
          onClick={() =>
            list.data?.nextCursor &&
            setPaging({ workspace: chosen, cursors: [...cursors, list.data.nextCursor] })
          }
        >
          Older files
        </button>
      </nav>
    </Page>
  );
}
