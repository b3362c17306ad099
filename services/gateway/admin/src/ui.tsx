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
  initial,
}: {
  label: string;
  name: string;
  type?: "text" | "password" | "url";
  required?: boolean;
  list?: string;
  placeholder?: string;
  /** The value the field starts with (an edit form's current value). */
  initial?: string;
}) {
  const common = { name, required, placeholder, defaultValue: initial };
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

/** A multi-line field: `rows` lines tall, starting with `initial`. */
export function TextArea({
  label,
  name,
  initial,
  rows = 4,
  required = false,
  placeholder,
}: {
  label: string;
  name: string;
  initial?: string;
  rows?: number;
  required?: boolean;
  placeholder?: string;
}) {
  return (
    <label>
      <span>{label}</span>
      <textarea
        name={name}
        rows={rows}
        required={required}
        placeholder={placeholder}
        defaultValue={initial}
      />
    </label>
  );
}

/** A value shown once (a new secret): the operator copies it now, the platform never shows it again. */
export function ShownOnce({ what, value }: { what: string; value: string | null }) {
  return value === null ? null : (
    <p role="status" class="once">
      {what} (shown once, copy it now): <code class="secret">{value}</code>
    </p>
  );
}

/** Submits a form: `run` gets its fields; the form is reset when it succeeds, its failure shown by `onError`. */
export const submit =
  (
    run: (fields: Record<string, string>, form: HTMLFormElement) => Promise<unknown>,
    onError: (t: string) => void,
  ) =>
  (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    run(fieldsOf(form), form).then(
      () => form.reset(),
      (err: unknown) => onError(describe(err)),
    );
  };

/** A form's fields by name. */
export const fieldsOf = (form: HTMLFormElement) =>
  Object.fromEntries(
    [...new FormData(form).entries()].map(([k, v]) => [k, typeof v === "string" ? v : v.name]),
  ) as Record<string, string>;

export const when = (iso: string | null) => (iso === null ? "–" : new Date(iso).toLocaleString());

/** A setting or custom field as the API describes it: its key, label, type and choices. */
export interface FieldShape {
  readonly key: string;
  readonly label: string;
  readonly type: string;
  readonly required: boolean;
  readonly options: readonly string[];
  readonly help?: string | null;
}

const INPUT_TYPES: Record<string, "number" | "url" | "color" | "date" | "email"> = {
  number: "number",
  url: "url",
  color: "color",
  date: "date",
  email: "email",
};

/** One input per field, by its type (text, number, boolean, select, url, color, date, email). */
export function ValueField({ field, value }: { field: FieldShape; value: string | null | undefined }) {
  const name = `value:${field.key}`;
  const label = field.label || field.key;
  if (field.type === "boolean") {
    return (
      <label class="inline">
        <input type="checkbox" name={name} defaultChecked={value === "true"} />
        <span>{label}</span>
      </label>
    );
  }
  return (
    <label>
      <span>
        {label}
        {field.required ? " (required)" : ""}
        {field.help ? ` – ${field.help}` : ""}
      </span>
      {field.type === "select" ? (
        // A select has no defaultValue: the current option is marked selected.
        <select name={name}>
          {!field.required && <option value="">(none)</option>}
          {field.options.map((o) => (
            <option key={o} selected={o === value}>
              {o}
            </option>
          ))}
        </select>
      ) : (
        <input
          // Preact types each input type's attributes apart; these types share the ones used here.
          {...({ type: INPUT_TYPES[field.type] ?? "text" } as { type: "text" })}
          name={name}
          defaultValue={value ?? ""}
          required={field.required}
        />
      )}
    </label>
  );
}

/**
 * The values a form of `ValueField`s holds: a number as a number, a checkbox as a boolean, an emptied
 * field as null (the value removed).
 */
export function valuesOf(
  form: HTMLFormElement,
  fields: readonly FieldShape[],
): Record<string, string | number | boolean | null> {
  const data = new FormData(form);
  const values: Record<string, string | number | boolean | null> = {};
  for (const f of fields) {
    const raw = data.get(`value:${f.key}`);
    if (f.type === "boolean") values[f.key] = raw === "on";
    else if (typeof raw !== "string" || raw === "") values[f.key] = null;
    else values[f.key] = f.type === "number" && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  }
  return values;
}

/** A multiple choice of permission keys from the catalogue (`permissions.list`), read back by its name. */
export function KeysField({ name, keys }: { name: string; keys: ReadonlyArray<{ key: string }> }) {
  return (
    <label>
      <span>Keys (choose several)</span>
      <select name={name} multiple size={8}>
        {keys.map((k) => (
          <option key={k.key} value={k.key}>
            {k.key}
          </option>
        ))}
      </select>
    </label>
  );
}
