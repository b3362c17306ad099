/** Pieces every page uses: loading with errors shown plainly, a table, a form field, an action button. */
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";

import { ApiError } from "./api.js";

export const describe = (error: unknown) =>
  error instanceof ApiError ? error.describe() : `Something failed: ${(error as Error).message}`;

/** Loads on mount and on `reload()`; `error` is the API's problem in words. */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[] = []) {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true });
  const run = useCallback(() => {
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => setState({ data, loading: false }),
      (error: unknown) => setState({ error: describe(error), loading: false }),
    );
  }, deps);
  useEffect(run, [run]);
  return { ...state, reload: run };
}

export function Problem({ text }: { text: string | null | undefined }) {
  return text ? (
    <p role="alert" class="problem">
      {text}
    </p>
  ) : null;
}

export function Page({ title, children }: { title: string; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · svc admin`;
  }, [title]);
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">{title}</h1>
      {children}
    </section>
  );
}

export function Table<T>({
  caption,
  rows,
  columns,
  empty,
}: {
  caption: string;
  rows: readonly T[];
  columns: ReadonlyArray<readonly [string, (row: T) => ComponentChildren]>;
  empty: string;
}) {
  if (rows.length === 0) return <p class="empty">{empty}</p>;
  return (
    <table>
      <caption>{caption}</caption>
      <thead>
        <tr>
          {columns.map(([label]) => (
            <th scope="col" key={label}>
              {label}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row, i) => (
          <tr key={i}>
            {columns.map(([label, cell]) => (
              <td key={label}>{cell(row)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A button that runs an API action, disabled while it runs; its failure is shown by `onError`. */
export function Action({
  label,
  run,
  onDone,
  onError,
  allowed = true,
  danger = false,
}: {
  label: string;
  run: () => Promise<unknown>;
  onDone?: () => void;
  onError: (text: string) => void;
  allowed?: boolean;
  danger?: boolean;
}) {
  const [busy, setBusy] = useState(false);
  return (
    <button
      type="button"
      class={danger ? "danger" : undefined}
      disabled={busy || !allowed}
      title={allowed ? undefined : "Your session lacks the key for this"}
      onClick={() => {
        setBusy(true);
        run().then(
          () => {
            setBusy(false);
            onDone?.();
          },
          (error: unknown) => {
            setBusy(false);
            onError(describe(error));
          },
        );
      }}
    >
      {label}
    </button>
  );
}

export function Field({
  label,
  name,
  type = "text",
  required = true,
  list,
  placeholder,
}: {
  label: string;
  name: string;
  type?: "text" | "password" | "url";
  required?: boolean;
  list?: string;
  placeholder?: string;
}) {
  const common = { name, required, placeholder };
  return (
    <label>
      <span>{label}</span>
      {type === "password" ? (
        <input type="password" {...common} />
      ) : type === "url" ? (
        <input type="url" {...common} />
      ) : (
        <input type="text" list={list} {...common} />
      )}
    </label>
  );
}

/** A form's fields by name. */
export const fieldsOf = (form: HTMLFormElement) =>
  Object.fromEntries(
    [...new FormData(form).entries()].map(([k, v]) => [k, typeof v === "string" ? v : v.name]),
  ) as Record<string, string>;

export const when = (iso: string | null) => (iso === null ? "–" : new Date(iso).toLocaleString());
