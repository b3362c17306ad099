/**
 * Themes: the catalogue of template definitions
 * (from installed packages' theme.json, or registered and switched through the API), each workspace's
 * theme plugin, its setting values checked against the field definitions, and the effective templates of
 * a workspace: per template key the active definition with the highest priority among the theme plugin
 * and the workspace's chain (active, entitled plugins), with the keys it inherits from.
 */
import { reachOf, requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import { type Queries, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";
import { checkValue, serialiseValue, type Theme, type ThemeField } from "@svc/plugin-package";

import { audit, type HandlerWith, type RouteName } from "./common.js";
import { chainEntitled, type EntitlementDeps, entitlementOf, isDelegated, tenantOf } from "./entitlements.js";

type Handler<K extends RouteName> = HandlerWith<EntitlementDeps, K>;

interface DefinitionRow {
  template_key: string;
  plugin_id: string;
  version: string;
  display_name: string;
  template_path: string;
  parent_template_key: string | null;
  surface: string;
  scope: string;
  is_active: boolean;
  priority: number;
  source: string;
}

const definitionView = (r: DefinitionRow) => ({
  templateKey: r.template_key,
  pluginId: r.plugin_id,
  version: r.version,
  displayName: r.display_name,
  templatePath: r.template_path,
  parentTemplateKey: r.parent_template_key,
  surface: r.surface,
  scope: r.scope,
  isActive: r.is_active,
  priority: r.priority,
  source: r.source,
});

export const listDefinitions: Handler<"themes.definitions"> = async (deps, req) => {
  const rows = await deps.db.any<DefinitionRow>(sql`
    SELECT d.* FROM plugin_registry.theme_definitions d
    JOIN plugin_registry.plugins p ON p.plugin_id = d.plugin_id AND p.version = d.version
    WHERE (${req.query.pluginId ?? null}::text IS NULL OR d.plugin_id = ${req.query.pluginId ?? null})
      AND (${req.query.surface ?? null}::text IS NULL OR d.surface = ${req.query.surface ?? null})
    ORDER BY d.template_key, d.priority DESC, d.plugin_id`);
  return { status: 200, body: { items: rows.map(definitionView) } };
};

export const putDefinition: Handler<"themes.definition-put"> = async (deps, req) => {
  const { templateKey, pluginId, version } = req.params;
  const b = req.body;
  const installed = await deps.db.maybeOne(
    sql`SELECT 1 AS one FROM plugin_registry.plugins WHERE plugin_id = ${pluginId} AND version = ${version}`,
  );
  if (installed === null) throw new NotFoundError(`Plugin '${pluginId}' ${version} is not installed.`);
  const existing = await deps.db.maybeOne<DefinitionRow>(sql`
    SELECT * FROM plugin_registry.theme_definitions
    WHERE template_key = ${templateKey} AND plugin_id = ${pluginId} AND version = ${version}`);
  const row = await deps.db.one<DefinitionRow>(sql`
    INSERT INTO plugin_registry.theme_definitions
      (template_key, plugin_id, version, display_name, template_path, parent_template_key, surface, scope,
       is_active, priority, source, updated_by)
    VALUES (${templateKey}, ${pluginId}, ${version},
            ${b.displayName ?? existing?.display_name ?? templateKey},
            ${b.templatePath ?? existing?.template_path ?? `views/surface/${templateKey}.html`},
            ${b.parentTemplateKey === undefined ? (existing?.parent_template_key ?? null) : b.parentTemplateKey},
            ${b.surface ?? existing?.surface ?? "workspace"}, ${b.scope ?? existing?.scope ?? "workspace"},
            ${b.isActive ?? existing?.is_active ?? true}, ${b.priority ?? existing?.priority ?? 100},
            'api', ${req.principal.subject})
    ON CONFLICT (template_key, plugin_id, version) DO UPDATE SET
      display_name = excluded.display_name, template_path = excluded.template_path,
      parent_template_key = excluded.parent_template_key, surface = excluded.surface, scope = excluded.scope,
      is_active = excluded.is_active, priority = excluded.priority, source = 'api',
      updated_by = excluded.updated_by, updated_at = now()
    RETURNING *`);
  await audit(deps.db, req.principal, `theme definition ${templateKey}`, { id: pluginId, version });
  deps.announce(pluginId);
  return { status: existing === null ? 201 : 200, body: definitionView(row) };
};

export const activateDefinition: Handler<"themes.definition-activation"> = async (deps, req) => {
  const { templateKey, pluginId, version } = req.params;
  const row = await deps.db.maybeOne<DefinitionRow>(sql`
    UPDATE plugin_registry.theme_definitions
    SET is_active = ${req.body.isActive}, updated_by = ${req.principal.subject}, updated_at = now()
    WHERE template_key = ${templateKey} AND plugin_id = ${pluginId} AND version = ${version}
    RETURNING *`);
  if (row === null) {
    throw new NotFoundError(`No template '${templateKey}' of plugin '${pluginId}' ${version}.`);
  }
  deps.announce(pluginId);
  return { status: 200, body: definitionView(row) };
};

interface Selected {
  readonly pluginId: string;
  readonly version: string;
  readonly theme: Theme | null;
}

/**
 * The condition a chosen theme must meet at every use, as a chain entry must: its plugin
 * active (so neither stopped, failed nor refused at re-verification) and the workspace still entitled. A
 * theme whose grant is withdrawn stops serving at once, and serves again if the grant comes back.
 */
const themeInForce = sql`p.state = 'active' AND p.refused_reason IS NULL AND ${chainEntitled}`;

/** The workspace's theme plugin, when it has one that is installed, active and entitled now. */
async function selected(db: Queries, workspaceKey: string): Promise<Selected | null> {
  const row = await db.maybeOne<{ plugin_id: string; version: string; theme: Theme | null }>(sql`
    SELECT w.plugin_id, p.version, p.theme FROM plugin_registry.workspace_themes w
    JOIN plugin_registry.plugins p USING (plugin_id)
    WHERE w.workspace_key = ${workspaceKey} AND ${themeInForce}`);
  return row === null ? null : { pluginId: row.plugin_id, version: row.version, theme: row.theme };
}

async function storedValues(db: Queries, workspaceKey: string): Promise<Map<string, string>> {
  const rows = await db.any<{ key: string; value: string }>(
    sql`SELECT key, value FROM plugin_registry.theme_values WHERE workspace_key = ${workspaceKey}`,
  );
  return new Map(rows.map((r) => [r.key, r.value]));
}

/**
 * The fields' defaults, overlaid by the workspace's stored values (for the theme's fields). Values outlive a
 * theme change, so each is checked again against the field of the theme now chosen: a
 * value the new field's type refuses is not shown; the default is.
 */
function valuesByKey(
  fields: readonly ThemeField[],
  stored: ReadonlyMap<string, string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of fields) {
    const own = stored.get(f.key);
    const value = own !== undefined && checkValue(f, own) === null ? own : f.value;
    if (value !== null) out[f.key] = value;
  }
  return out;
}

/** The theme of a workspace (also served, without authentication, by the public theme route). */
export async function themeOf(db: Queries, workspaceKey: string) {
  const theme = await selected(db, workspaceKey);
  if (theme === null) {
    return { workspaceKey, themePluginId: null, themeVersion: null, valuesByKey: {}, sectionLayouts: [] };
  }
  const fields = theme.theme?.fields ?? [];
  const sections = new Map<string, string[]>();
  for (const f of fields) {
    const section = f.group ?? "General";
    sections.set(section, [...(sections.get(section) ?? []), f.key]);
  }
  return {
    workspaceKey,
    themePluginId: theme.pluginId,
    themeVersion: theme.version,
    valuesByKey: valuesByKey(fields, await storedValues(db, workspaceKey)),
    sectionLayouts: [...sections].map(([section, keys]) => ({ section, keys })),
  };
}

export const getWorkspaceTheme: Handler<"themes.workspace"> = async (deps, req) => ({
  status: 200,
  body: await themeOf(deps.db, req.params.workspaceKey),
});

export const putWorkspaceTheme: Handler<"themes.workspace-put"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  const pluginId = req.body.themePluginId;
  const tenantKey = await tenantOf(deps, wk);
  const plugin = await deps.db.maybeOne<{
    theme: Theme | null;
    state: string;
    refused_reason: string | null;
  }>(sql`SELECT theme, state, refused_reason FROM plugin_registry.plugins WHERE plugin_id = ${pluginId}`);
  const field = "/body/themePluginId";
  if (plugin === null)
    throw new ValidationError([{ field, message: `plugin '${pluginId}' is not installed` }]);
  if (plugin.theme === null)
    throw new ValidationError([{ field, message: `plugin '${pluginId}' has no theme.json` }]);
  if ((await entitlementOf(deps.grants, pluginId, tenantKey, wk)).via === null) {
    throw new ValidationError([
      { field, message: `workspace '${wk}' is not entitled to plugin '${pluginId}'` },
    ]);
  }
  if (plugin.state !== "active" || plugin.refused_reason !== null) {
    throw new ValidationError([
      { field, message: `plugin '${pluginId}' is not active: activate it before choosing it as a theme` },
    ]);
  }
  // The chain's rule: a workspace session chooses only a plugin delegated to its tenant.
  if (reachOf(req.principal).kind === "workspace" && !(await isDelegated(deps.db, tenantKey, pluginId))) {
    throw new ValidationError([
      { field, message: `plugin '${pluginId}' is not delegated to tenant '${tenantKey}'` },
    ]);
  }
  await deps.db.query(sql`
    INSERT INTO plugin_registry.workspace_themes (workspace_key, plugin_id, tenant_key, selected_by)
    VALUES (${wk}, ${pluginId}, ${tenantKey}, ${req.principal.subject})
    ON CONFLICT (workspace_key) DO UPDATE SET
      plugin_id = excluded.plugin_id, tenant_key = excluded.tenant_key,
      selected_by = excluded.selected_by, selected_at = now()`);
  await audit(deps.db, req.principal, `theme ${wk}`, { id: pluginId }, undefined, wk);
  deps.announce(pluginId);
  return { status: 200, body: await themeOf(deps.db, wk) };
};

export const deleteWorkspaceTheme: Handler<"themes.workspace-delete"> = async (deps, req) => {
  const gone = await deps.db.maybeOne<{ plugin_id: string }>(sql`
    DELETE FROM plugin_registry.workspace_themes WHERE workspace_key = ${req.params.workspaceKey}
    RETURNING plugin_id`);
  if (gone === null) throw new NotFoundError(`Workspace '${req.params.workspaceKey}' has no theme.`);
  deps.announce(gone.plugin_id);
  return { status: 204 };
};

async function settingsOf(db: Queries, workspaceKey: string) {
  const theme = await selected(db, workspaceKey);
  const fields = theme?.theme?.fields ?? [];
  return {
    workspaceKey,
    themePluginId: theme?.pluginId ?? null,
    themeVersion: theme?.version ?? null,
    fields: fields.map((f) => ({ ...f, options: [...f.options] })),
    valuesByKey: valuesByKey(fields, await storedValues(db, workspaceKey)),
  };
}

export const getSettings: Handler<"themes.settings"> = async (deps, req) => ({
  status: 200,
  body: await settingsOf(deps.db, req.params.workspaceKey),
});

export const putSettings: Handler<"themes.settings-put"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  const theme = await selected(deps.db, wk);
  if (theme === null) throw new NotFoundError(`Workspace '${wk}' has no theme: choose one first.`);
  const fields = new Map((theme.theme?.fields ?? []).map((f) => [f.key, f]));
  const violations: Array<{ field: string; message: string }> = [];
  const set: Array<[string, string]> = [];
  const unset: string[] = [];
  for (const [key, raw] of Object.entries(req.body.values)) {
    const field = fields.get(key);
    const where = `/body/values/${key}`;
    if (field === undefined) {
      violations.push({ field: where, message: `the theme has no setting '${key}'` });
      continue;
    }
    if (raw === null) {
      if (field.required && field.value === null) violations.push({ field: where, message: "is required" });
      else unset.push(key);
      continue;
    }
    const value = serialiseValue(raw) ?? "";
    const problem = checkValue(field, value);
    if (problem !== null) violations.push({ field: where, message: problem });
    else set.push([key, value]);
  }
  if (violations.length > 0) throw new ValidationError(violations);
  await deps.db.transaction(async (tx) => {
    if (unset.length > 0) {
      await tx.query(sql`
        DELETE FROM plugin_registry.theme_values WHERE workspace_key = ${wk} AND key = ANY(${unset}::text[])`);
    }
    if (set.length > 0) {
      await tx.query(sql`
        INSERT INTO plugin_registry.theme_values (workspace_key, key, value, updated_by)
        SELECT ${wk}, k, v, ${req.principal.subject}
        FROM unnest(${set.map((s) => s[0])}::text[], ${set.map((s) => s[1])}::text[]) AS t(k, v)
        ON CONFLICT (workspace_key, key) DO UPDATE SET
          value = excluded.value, updated_by = excluded.updated_by, updated_at = now()`);
    }
  });
  deps.announce(theme.pluginId);
  return { status: 200, body: await settingsOf(deps.db, wk) };
};

/**
 * The templates a workspace uses: for each template key, among the active definitions of the installed
 * versions of its theme plugin and of its chain's active, entitled plugins, the one with the highest
 * priority (ties: the theme plugin, then chain order); with the keys it inherits from.
 */
export async function effectiveTemplates(db: Queries, workspaceKey: string) {
  const theme = await selected(db, workspaceKey);
  const rows = await db.any<DefinitionRow & { rank: number }>(sql`
    WITH sources AS (
      SELECT w.plugin_id, w.position + 1 AS rank
      FROM plugin_registry.workspace_plugins w JOIN plugin_registry.plugins p USING (plugin_id)
      WHERE w.workspace_key = ${workspaceKey} AND p.state = 'active' AND ${chainEntitled}
      UNION ALL
      SELECT w.plugin_id, 0
      FROM plugin_registry.workspace_themes w JOIN plugin_registry.plugins p USING (plugin_id)
      WHERE w.workspace_key = ${workspaceKey} AND ${themeInForce}
    )
    SELECT DISTINCT ON (d.template_key) d.*, s.rank
    FROM plugin_registry.theme_definitions d
    JOIN plugin_registry.plugins p ON p.plugin_id = d.plugin_id AND p.version = d.version
    JOIN sources s ON s.plugin_id = d.plugin_id
    WHERE d.is_active
    ORDER BY d.template_key, d.priority DESC, s.rank`);
  const byKey = new Map(rows.map((r) => [r.template_key, r]));
  const inheritance = (key: string): string[] => {
    const out = [key];
    let parent = byKey.get(key)?.parent_template_key ?? null;
    while (parent !== null && !out.includes(parent) && out.length < 20) {
      out.push(parent);
      parent = byKey.get(parent)?.parent_template_key ?? null;
    }
    return out;
  };
  return {
    workspaceKey,
    themePluginId: theme?.pluginId ?? null,
    themeVersion: theme?.version ?? null,
    templates: rows.map((r) => ({
      templateKey: r.template_key,
      pluginId: r.plugin_id,
      version: r.version,
      displayName: r.display_name,
      templatePath: r.template_path,
      parentTemplateKey: r.parent_template_key,
      inheritance: inheritance(r.template_key),
      surface: r.surface,
      scope: r.scope,
      priority: r.priority,
    })),
  };
}

export const getEffective: Handler<"themes.effective"> = async (deps, req) => ({
  status: 200,
  body: await effectiveTemplates(deps.db, req.params.workspaceKey),
});

/** The caller's workspace: a workspace session's own; for a platform session `workspaceKey` (default `default`). */
function callersWorkspace(principal: Principal, requested: string | undefined): string {
  const reach = requireReach(principal);
  if (reach.kind === "workspace") return reach.workspaceKey;
  return requested === undefined || requested.trim() === "" ? "default" : requested;
}

export const getEffectiveCurrent: Handler<"themes.effective-current"> = async (deps, req) => {
  const wk = callersWorkspace(req.principal, req.query.workspaceKey);
  await tenantOf(deps, wk);
  return { status: 200, body: await effectiveTemplates(deps.db, wk) };
};
