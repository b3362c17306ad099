-- Themes: a plugin's theme.json, parsed leniently at install (fields and
-- defaults in plugins.theme), its template definitions per plugin version (from the package, or registered
-- and switched through the API), each workspace's theme plugin and its setting values.
ALTER TABLE plugin_registry.plugins ADD COLUMN theme jsonb;

CREATE TABLE plugin_registry.theme_definitions (
  template_key        text NOT NULL,
  plugin_id           text NOT NULL REFERENCES plugin_registry.plugins (plugin_id) ON DELETE CASCADE,
  version             text NOT NULL,
  display_name        text NOT NULL,
  template_path       text NOT NULL,
  parent_template_key text,
  surface             text NOT NULL,
  scope               text NOT NULL,
  is_active           boolean NOT NULL DEFAULT true,
  priority            integer NOT NULL DEFAULT 100,
  source              text NOT NULL CHECK (source IN ('package', 'api')),
  updated_by          text NOT NULL,
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (template_key, plugin_id, version)
);
CREATE INDEX theme_definitions_plugin ON plugin_registry.theme_definitions (plugin_id, version);

CREATE TABLE plugin_registry.workspace_themes (
  workspace_key text PRIMARY KEY,
  plugin_id     text NOT NULL REFERENCES plugin_registry.plugins (plugin_id) ON DELETE CASCADE,
  tenant_key    text NOT NULL,
  selected_by   text NOT NULL,
  selected_at   timestamptz NOT NULL DEFAULT now()
);

-- A workspace's setting values, serialised as strings, by setting key; they outlive a theme change.
CREATE TABLE plugin_registry.theme_values (
  workspace_key text NOT NULL,
  key           text NOT NULL,
  value         text NOT NULL,
  updated_by    text NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_key, key)
);
