/**
 * Themes: the catalogue of template definitions
 * (from installed packages' theme.json, or registered and switched through the API), each workspace's
 * theme plugin, its setting values checked against the field definitions, and the effective templates of
 * a workspace: per template key the active definition with the highest priority among the theme plugin
 * and the workspace's chain (active, entitled plugins), with the keys it inherits from.
 *
 * The routes ask a `ThemeTables` port (`themeTables` is the PostgreSQL one), so their rules are unit-tested
 * with the tables in memory.
 */
import { reachOf, requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import { type Db, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";
import {
  checkValue,
  serialiseValue,
  type Theme,
  type ThemeDefinition,
  type ThemeField,
} from "@svc/plugin-package";

import { audit, findPlugin, type HandlerWith, type RouteName } from "./common.js";
import { chainEntitled, type EntitlementDeps, entitlementOf, isDelegated, tenantOf } from "./entitlements.js";

/** A template definition as stored (and as the API shows it): theme.json's, of a plugin's version. */
export interface TemplateDefinition extends ThemeDefinition {
  readonly pluginId: string;
  readonly version: string;
  /** Where it came from: the package's theme.json or the API. */
  readonly source: string;
}

/** A workspace's theme plugin, in force: installed, active, not refused, and the workspace entitled now. */
export interface SelectedTheme {
  readonly pluginId: string;
  readonly version: string;
  readonly theme: Theme | null;
}

/** The themes' tables. */
export interface ThemeTables {
  /** The definitions of installed versions, by template key, then priority (highest first), then plugin. */
  definitions(filter: { pluginId: string | null; surface: string | null }): Promise<TemplateDefinition[]>;
  /** Whether that version of the plugin is installed. */
  installed(pluginId: string, version: string): Promise<boolean>;
  definition(templateKey: string, pluginId: string, version: string): Promise<TemplateDefinition | null>;
  /** Adds or replaces a definition, from the API. */
  putDefinition(definition: Omit<TemplateDefinition, "source">, by: string): Promise<TemplateDefinition>;
  /** Switches a definition on or off; null when there is no such definition. */
  setActive(
    templateKey: string,
    pluginId: string,
    version: string,
    isActive: boolean,
    by: string,
  ): Promise<TemplateDefinition | null>;
  /** The workspace's theme plugin while it is in force, else null. */
  selected(workspaceKey: string): Promise<SelectedTheme | null>;
  /** The installed plugin's theme.json and whether it is active (and not refused), or null. */
  plugin(pluginId: string): Promise<{ readonly theme: Theme | null; readonly active: boolean } | null>;
  /** Whether the platform delegated the plugin to the tenant. */
  delegated(tenantKey: string, pluginId: string): Promise<boolean>;
  /** Chooses the workspace's theme plugin. */
  choose(workspaceKey: string, pluginId: string, tenantKey: string, by: string): Promise<void>;
  /** Removes the workspace's theme plugin; the plugin it had, or null when it had none. */
  unchoose(workspaceKey: string): Promise<string | null>;
  /** The workspace's stored setting values by key (of any theme it has had). */
  storedValues(workspaceKey: string): Promise<Map<string, string>>;
  /** Sets and clears setting values, in one change. */
  saveValues(
    workspaceKey: string,
    set: ReadonlyArray<readonly [string, string]>,
    unset: readonly string[],
    by: string,
  ): Promise<void>;
  /**
   * The active definitions of the workspace's sources, each with its source's rank: the theme plugin in
   * force 0, then its chain's active, entitled plugins from 1 in chain order; ordered by template key
   * (which one wins a key is `effectiveTemplates`' rule).
   */
  candidates(workspaceKey: string): Promise<Array<TemplateDefinition & { readonly rank: number }>>;
  /** Records a change in the registry's audit. */
  audit(
    principal: Principal,
    action: string,
    plugin: { id: string; version?: string },
    workspaceKey?: string,
  ): Promise<void>;
}

export interface ThemeDeps extends Pick<EntitlementDeps, "tenancy" | "grants" | "announce"> {
  readonly themes: ThemeTables;
}

type Handler<K extends RouteName> = HandlerWith<ThemeDeps, K>;

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

const definitionOf = (r: DefinitionRow): TemplateDefinition => ({
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

/**
 * The condition a chosen theme must meet at every use, as a chain entry must: its plugin
 * active (so neither stopped, failed nor refused at re-verification) and the workspace still entitled. A
 * theme whose grant is withdrawn stops serving at once, and serves again if the grant comes back.
 */
const themeInForce = sql`p.state = 'active' AND p.refused_reason IS NULL AND ${chainEntitled}`;

/** The PostgreSQL theme tables. */
export function themeTables(db: Db): ThemeTables {
  return {
    async definitions({ pluginId, surface }) {
      const rows = await db.any<DefinitionRow>(sql`
        SELECT d.* FROM plugin_registry.theme_definitions d
        JOIN plugin_registry.plugins p ON p.plugin_id = d.plugin_id AND p.version = d.version
        WHERE (${pluginId}::text IS NULL OR d.plugin_id = ${pluginId})
          AND (${surface}::text IS NULL OR d.surface = ${surface})
        ORDER BY d.template_key, d.priority DESC, d.plugin_id`);
      return rows.map(definitionOf);
    },
    async installed(pluginId, version) {
      const row = await db.maybeOne(
        sql`SELECT 1 AS one FROM plugin_registry.plugins WHERE plugin_id = ${pluginId} AND version = ${version}`,
      );
      return row !== null;
    },
    async definition(templateKey, pluginId, version) {
      const row = await db.maybeOne<DefinitionRow>(sql`
        SELECT * FROM plugin_registry.theme_definitions
        WHERE template_key = ${templateKey} AND plugin_id = ${pluginId} AND version = ${version}`);
      return row === null ? null : definitionOf(row);
    },
    async putDefinition(d, by) {
      const row = await db.one<DefinitionRow>(sql`
        INSERT INTO plugin_registry.theme_definitions
          (template_key, plugin_id, version, display_name, template_path, parent_template_key, surface, scope,
           is_active, priority, source, updated_by)
        VALUES (${d.templateKey}, ${d.pluginId}, ${d.version}, ${d.displayName}, ${d.templatePath},
                ${d.parentTemplateKey}, ${d.surface}, ${d.scope}, ${d.isActive}, ${d.priority}, 'api', ${by})
        ON CONFLICT (template_key, plugin_id, version) DO UPDATE SET
          display_name = excluded.display_name, template_path = excluded.template_path,
          parent_template_key = excluded.parent_template_key, surface = excluded.surface, scope = excluded.scope,
          is_active = excluded.is_active, priority = excluded.priority, source = 'api',
          updated_by = excluded.updated_by, updated_at = now()
        RETURNING *`);
      return definitionOf(row);
    },
    async setActive(templateKey, pluginId, version, isActive, by) {
      const row = await db.maybeOne<DefinitionRow>(sql`
        UPDATE plugin_registry.theme_definitions
        SET is_active = ${isActive}, updated_by = ${by}, updated_at = now()
        WHERE template_key = ${templateKey} AND plugin_id = ${pluginId} AND version = ${version}
        RETURNING *`);
      return row === null ? null : definitionOf(row);
    },
    async selected(workspaceKey) {
      const row = await db.maybeOne<{ plugin_id: string; version: string; theme: Theme | null }>(sql`
        SELECT w.plugin_id, p.version, p.theme FROM plugin_registry.workspace_themes w
        JOIN plugin_registry.plugins p USING (plugin_id)
        WHERE w.workspace_key = ${workspaceKey} AND ${themeInForce}`);
      return row === null ? null : { pluginId: row.plugin_id, version: row.version, theme: row.theme };
    },
    async plugin(pluginId) {
      const row = await findPlugin(db, pluginId);
      return row === null
        ? null
        : { theme: row.theme, active: row.state === "active" && row.refused_reason === null };
    },
    delegated: (tenantKey, pluginId) => isDelegated(db, tenantKey, pluginId),
    async choose(workspaceKey, pluginId, tenantKey, by) {
      await db.query(sql`
        INSERT INTO plugin_registry.workspace_themes (workspace_key, plugin_id, tenant_key, selected_by)
        VALUES (${workspaceKey}, ${pluginId}, ${tenantKey}, ${by})
        ON CONFLICT (workspace_key) DO UPDATE SET
          plugin_id = excluded.plugin_id, tenant_key = excluded.tenant_key,
          selected_by = excluded.selected_by, selected_at = now()`);
    },
    async unchoose(workspaceKey) {
      const gone = await db.maybeOne<{ plugin_id: string }>(sql`
        DELETE FROM plugin_registry.workspace_themes WHERE workspace_key = ${workspaceKey}
        RETURNING plugin_id`);
      return gone?.plugin_id ?? null;
    },
    async storedValues(workspaceKey) {
      const rows = await db.any<{ key: string; value: string }>(
        sql`SELECT key, value FROM plugin_registry.theme_values WHERE workspace_key = ${workspaceKey}`,
      );
      return new Map(rows.map((r) => [r.key, r.value]));
    },
    saveValues: (workspaceKey, set, unset, by) =>
      db.transaction(async (tx) => {
        if (unset.length > 0) {
          await tx.query(sql`
            DELETE FROM plugin_registry.theme_values
            WHERE workspace_key = ${workspaceKey} AND key = ANY(${unset}::text[])`);
        }
        if (set.length > 0) {
          await tx.query(sql`
            INSERT INTO plugin_registry.theme_values (workspace_key, key, value, updated_by)
            SELECT ${workspaceKey}, k, v, ${by}
            FROM unnest(${set.map((s) => s[0])}::text[], ${set.map((s) => s[1])}::text[]) AS t(k, v)
            ON CONFLICT (workspace_key, key) DO UPDATE SET
              value = excluded.value, updated_by = excluded.updated_by, updated_at = now()`);
        }
      }),
    async candidates(workspaceKey) {
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
        SELECT d.*, s.rank
        FROM plugin_registry.theme_definitions d
        JOIN plugin_registry.plugins p ON p.plugin_id = d.plugin_id AND p.version = d.version
        JOIN sources s ON s.plugin_id = d.plugin_id
        WHERE d.is_active
        ORDER BY d.template_key`);
      return rows.map((r) => ({ ...definitionOf(r), rank: r.rank }));
    },
    audit: (principal, action, plugin, workspaceKey) =>
      audit(db, principal, action, plugin, undefined, workspaceKey ?? null),
  };
}

export const listDefinitions: Handler<"themes.definitions"> = async (deps, req) => ({
  status: 200,
  body: {
    items: await deps.themes.definitions({
      pluginId: req.query.pluginId ?? null,
      surface: req.query.surface ?? null,
    }),
  },
});

export const putDefinition: Handler<"themes.definition-put"> = async (deps, req) => {
  const { templateKey, pluginId, version } = req.params;
  const b = req.body;
  if (!(await deps.themes.installed(pluginId, version))) {
    throw new NotFoundError(`Plugin '${pluginId}' ${version} is not installed.`);
  }
  // What the body leaves out stays as it was, or takes its default on a new definition.
  const existing = await deps.themes.definition(templateKey, pluginId, version);
  const stored = await deps.themes.putDefinition(
    {
      templateKey,
      pluginId,
      version,
      displayName: b.displayName ?? existing?.displayName ?? templateKey,
      templatePath: b.templatePath ?? existing?.templatePath ?? `views/surface/${templateKey}.html`,
      parentTemplateKey:
        b.parentTemplateKey === undefined ? (existing?.parentTemplateKey ?? null) : b.parentTemplateKey,
      surface: b.surface ?? existing?.surface ?? "workspace",
      scope: b.scope ?? existing?.scope ?? "workspace",
      isActive: b.isActive ?? existing?.isActive ?? true,
      priority: b.priority ?? existing?.priority ?? 100,
    },
    req.principal.subject,
  );
  await deps.themes.audit(req.principal, `theme definition ${templateKey}`, { id: pluginId, version });
  deps.announce(pluginId);
  return { status: existing === null ? 201 : 200, body: stored };
};

export const activateDefinition: Handler<"themes.definition-activation"> = async (deps, req) => {
  const { templateKey, pluginId, version } = req.params;
  const row = await deps.themes.setActive(
    templateKey,
    pluginId,
    version,
    req.body.isActive,
    req.principal.subject,
  );
  if (row === null) {
    throw new NotFoundError(`No template '${templateKey}' of plugin '${pluginId}' ${version}.`);
  }
  deps.announce(pluginId);
  return { status: 200, body: row };
};

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
export async function themeOf(themes: Pick<ThemeTables, "selected" | "storedValues">, workspaceKey: string) {
  const theme = await themes.selected(workspaceKey);
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
    valuesByKey: valuesByKey(fields, await themes.storedValues(workspaceKey)),
    sectionLayouts: [...sections].map(([section, keys]) => ({ section, keys })),
  };
}

export const getWorkspaceTheme: Handler<"themes.workspace"> = async (deps, req) => ({
  status: 200,
  body: await themeOf(deps.themes, req.params.workspaceKey),
});

export const putWorkspaceTheme: Handler<"themes.workspace-put"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  const pluginId = req.body.themePluginId;
  const tenantKey = await tenantOf(deps, wk);
  const plugin = await deps.themes.plugin(pluginId);
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
  if (!plugin.active) {
    throw new ValidationError([
      { field, message: `plugin '${pluginId}' is not active: activate it before choosing it as a theme` },
    ]);
  }
  // The chain's rule: a workspace session chooses only a plugin delegated to its tenant.
  if (reachOf(req.principal).kind === "workspace" && !(await deps.themes.delegated(tenantKey, pluginId))) {
    throw new ValidationError([
      { field, message: `plugin '${pluginId}' is not delegated to tenant '${tenantKey}'` },
    ]);
  }
  await deps.themes.choose(wk, pluginId, tenantKey, req.principal.subject);
  await deps.themes.audit(req.principal, `theme ${wk}`, { id: pluginId }, wk);
  deps.announce(pluginId);
  return { status: 200, body: await themeOf(deps.themes, wk) };
};

export const deleteWorkspaceTheme: Handler<"themes.workspace-delete"> = async (deps, req) => {
  const gone = await deps.themes.unchoose(req.params.workspaceKey);
  if (gone === null) throw new NotFoundError(`Workspace '${req.params.workspaceKey}' has no theme.`);
  deps.announce(gone);
  return { status: 204 };
};

async function settingsOf(themes: ThemeTables, workspaceKey: string) {
  const theme = await themes.selected(workspaceKey);
  const fields = theme?.theme?.fields ?? [];
  return {
    workspaceKey,
    themePluginId: theme?.pluginId ?? null,
    themeVersion: theme?.version ?? null,
    fields: fields.map((f) => ({ ...f, options: [...f.options] })),
    valuesByKey: valuesByKey(fields, await themes.storedValues(workspaceKey)),
  };
}

export const getSettings: Handler<"themes.settings"> = async (deps, req) => ({
  status: 200,
  body: await settingsOf(deps.themes, req.params.workspaceKey),
});

export const putSettings: Handler<"themes.settings-put"> = async (deps, req) => {
  const wk = req.params.workspaceKey;
  const theme = await deps.themes.selected(wk);
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
  await deps.themes.saveValues(wk, set, unset, req.principal.subject);
  deps.announce(theme.pluginId);
  return { status: 200, body: await settingsOf(deps.themes, wk) };
};

/**
 * The templates a workspace uses: for each template key, among the active definitions of the installed
 * versions of its theme plugin and of its chain's active, entitled plugins, the one with the highest
 * priority (ties: the theme plugin, then chain order); with the keys it inherits from.
 */
export async function effectiveTemplates(themes: ThemeTables, workspaceKey: string) {
  const theme = await themes.selected(workspaceKey);
  // In the candidates' order of template keys; a key's place is where it first came.
  const byKey = new Map<string, TemplateDefinition & { readonly rank: number }>();
  for (const d of await themes.candidates(workspaceKey)) {
    const held = byKey.get(d.templateKey);
    if (
      held === undefined ||
      d.priority > held.priority ||
      (d.priority === held.priority && d.rank < held.rank)
    )
      byKey.set(d.templateKey, d);
  }
  const inheritance = (key: string): string[] => {
    const out = [key];
    let parent = byKey.get(key)?.parentTemplateKey ?? null;
    while (parent !== null && !out.includes(parent) && out.length < 20) {
      out.push(parent);
      parent = byKey.get(parent)?.parentTemplateKey ?? null;
    }
    return out;
  };
  return {
    workspaceKey,
    themePluginId: theme?.pluginId ?? null,
    themeVersion: theme?.version ?? null,
    templates: [...byKey.values()].map((d) => ({
      templateKey: d.templateKey,
      pluginId: d.pluginId,
      version: d.version,
      displayName: d.displayName,
      templatePath: d.templatePath,
      parentTemplateKey: d.parentTemplateKey,
      inheritance: inheritance(d.templateKey),
      surface: d.surface,
      scope: d.scope,
      priority: d.priority,
    })),
  };
}

export const getEffective: Handler<"themes.effective"> = async (deps, req) => ({
  status: 200,
  body: await effectiveTemplates(deps.themes, req.params.workspaceKey),
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
  return { status: 200, body: await effectiveTemplates(deps.themes, wk) };
};
