import { useState } from "preact/hooks";

import { call } from "../api.js";
import { can } from "../session.js";
import { Action, Page, Problem, submit, Table, useLoad, ValueField, valuesOf } from "../ui.js";
import { useWorkspaceChoice } from "../workspace-choice.js";

/**
 * Themes: the template definitions the plugins bring (active or not), the theme a workspace uses, and
 * that theme's settings for the workspace.
 */
export function Themes() {
  const { chosen, picker, error: listError } = useWorkspaceChoice();
  const definitions = useLoad(() => call("themes.definitions", { query: {} }));
  const theme = useLoad(
    () => (chosen ? call("themes.workspace", { params: { workspaceKey: chosen } }) : Promise.resolve(null)),
    [chosen],
  );
  const settings = useLoad(
    () => (chosen ? call("themes.settings", { params: { workspaceKey: chosen } }) : Promise.resolve(null)),
    [chosen],
  );
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const done = () => {
    setError(null);
    definitions.reload();
    theme.reload();
    settings.reload();
  };
  const themes = [...new Set((definitions.data?.items ?? []).map((d) => d.pluginId))];
  const fields = (settings.data?.fields ?? []).map((f) => ({ ...f, help: f.helpText }));
  const mayChange = can("extension.update");
  return (
    <Page title="Themes">
      <Problem text={error ?? definitions.error} />
      <Table
        caption="Template definitions"
        rows={definitions.data?.items ?? []}
        empty={definitions.loading ? "Loading…" : "No plugin brings a template."}
        columns={[
          ["Template", (d) => <code>{d.templateKey}</code>],
          ["Name", (d) => d.displayName],
          ["Plugin", (d) => `${d.pluginId} ${d.version}`],
          ["Surface", (d) => d.surface],
          ["Priority", (d) => d.priority],
          ["Active", (d) => (d.isActive ? "yes" : "no")],
          [
            "",
            (d) => (
              <Action
                label={`${d.isActive ? "Deactivate" : "Activate"} template ${d.templateKey} of ${d.pluginId}`}
                allowed={mayChange}
                run={() =>
                  call("themes.definition-activation", {
                    params: { templateKey: d.templateKey, pluginId: d.pluginId, version: d.version },
                    body: { isActive: !d.isActive },
                  })
                }
                onDone={done}
                onError={setError}
              />
            ),
          ],
        ]}
      />

      <h2>A workspace's theme</h2>
      {picker}
      <Problem text={listError ?? theme.error ?? settings.error} />
      <p>
        {theme.data
          ? theme.data.themePluginId === null
            ? `${chosen} uses the platform's default theme.`
            : `${chosen} uses the theme of ${theme.data.themePluginId} ${theme.data.themeVersion ?? ""}.`
          : ""}
      </p>
      {mayChange && chosen && (
        <form
          aria-label="Choose a theme"
          onSubmit={submit(async (f) => {
            await call("themes.workspace-put", {
              params: { workspaceKey: chosen },
              body: { themePluginId: f.themePluginId ?? "" },
            });
            done();
          }, setError)}
        >
          <label>
            <span>Theme</span>
            <select name="themePluginId">
              {themes.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </label>
          <button type="submit">Use this theme</button>
          <Action
            label="Back to the default theme"
            allowed={theme.data?.themePluginId !== null}
            run={() => call("themes.workspace-delete", { params: { workspaceKey: chosen } })}
            onDone={done}
            onError={setError}
          />
        </form>
      )}
      {settings.data && fields.length > 0 && (
        <form
          aria-label="Theme settings"
          key={`${chosen}:${JSON.stringify(settings.data.valuesByKey)}`}
          onSubmit={submit(async (_f, form) => {
            await call("themes.settings-put", {
              params: { workspaceKey: chosen },
              body: { values: valuesOf(form, fields) },
            });
            setSaved(`Settings of ${chosen} saved.`);
            done();
          }, setError)}
        >
          <h2>Settings of {settings.data.themePluginId ?? "the theme"}</h2>
          <fieldset disabled={!mayChange}>
            <legend>Values for {chosen}</legend>
            {[...fields]
              .sort((a, b) => a.order - b.order)
              .map((f) => (
                <ValueField key={f.key} field={f} value={settings.data?.valuesByKey[f.key] ?? f.value} />
              ))}
          </fieldset>
          <button type="submit" disabled={!mayChange}>
            Save settings
          </button>
          <p role="status">{saved}</p>
        </form>
      )}
    </Page>
  );
}
