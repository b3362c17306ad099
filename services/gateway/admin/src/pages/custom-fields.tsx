import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Field, Page, Problem, submit, Table, useLoad, ValueField, valuesOf } from "../ui.js";

const ID_HINT: Record<string, string> = {
  user: "the user's id",
  workspace: "the workspace key",
  tenant: "the tenant key",
};

/** The custom fields plugins define, and one entity's values read and changed. */
export function CustomFields() {
  const definitions = useLoad(() => call("custom-fields.definitions", { query: {} }));
  const [target, setTarget] = useState<{ entityName: string; entityId: string } | null>(null);
  const values = useLoad(
    () => (target ? call("custom-fields.get", { params: target }) : Promise.resolve(null)),
    [target?.entityName, target?.entityId],
  );
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const entities = [...new Set((definitions.data?.items ?? []).map((d) => d.entityName))];
  const fields = (values.data?.fields ?? []).map((f) => ({ ...f, help: f.description }));
  return (
    <Page title="Custom fields">
      <Problem text={error ?? definitions.error} />
      <Table
        caption="Fields the plugins define"
        rows={definitions.data?.items ?? []}
        empty={definitions.loading ? "Loading…" : "No installed plugin defines a custom field."}
        columns={[
          ["On", (d) => <code>{d.entityName}</code>],
          ["Field", (d) => <code>{d.key}</code>],
          ["Label", (d) => d.label],
          ["Type", (d) => (d.type === "select" ? `select: ${d.options.join(", ")}` : d.type)],
          ["Required", (d) => (d.required ? "yes" : "no")],
          ["Plugin", (d) => d.pluginId],
        ]}
      />
      {entities.length > 0 && (
        <form
          aria-label="Open an entity's fields"
          onSubmit={submit(async (f) => {
            setSaved(null);
            setTarget({ entityName: f.entityName ?? "", entityId: f.entityId ?? "" });
          }, setError)}
        >
          <h2>An entity's values</h2>
          <label>
            <span>Entity</span>
            <select name="entityName">
              {entities.map((e) => (
                <option key={e}>{e}</option>
              ))}
            </select>
          </label>
          <Field label={`Id (${Object.values(ID_HINT).join(", ")}, or the plugin's own)`} name="entityId" />
          <button type="submit">Open</button>
        </form>
      )}
      <Problem text={values.error} />
      {target && values.data && (
        <form
          aria-label="Custom field values"
          key={`${target.entityName}:${target.entityId}:${JSON.stringify(values.data.values)}`}
          onSubmit={submit(async (_f, form) => {
            await call("custom-fields.put", { params: target, body: { values: valuesOf(form, fields) } });
            setSaved(`Values of ${target.entityName} ${target.entityId} saved.`);
            setError(null);
            values.reload();
          }, setError)}
        >
          <fieldset disabled={!can("customfield.update")}>
            <legend>
              {target.entityName} {target.entityId}
            </legend>
            {fields.map((f) => (
              <ValueField key={f.key} field={f} value={values.data?.values[f.key]} />
            ))}
          </fieldset>
          <button type="submit" disabled={!can("customfield.update")}>
            Save values
          </button>
          <p role="status">{saved}</p>
        </form>
      )}
    </Page>
  );
}
