-- Plugins at work: the lifecycle state replaces the bare flag, and workspaces get their
-- ordered plugin chain.
ALTER TABLE plugin_registry.plugins
  ADD COLUMN state text NOT NULL DEFAULT 'inactive' CHECK (state IN ('inactive', 'active', 'failed')),
  ADD COLUMN failure_reason text;
UPDATE plugin_registry.plugins SET state = 'active' WHERE is_active;
ALTER TABLE plugin_registry.plugins DROP COLUMN is_active;

-- A workspace's plugin chain: position 0 is the primary. Uninstalling a plugin takes
-- it out of every chain.
CREATE TABLE plugin_registry.workspace_plugins (
  workspace_key text NOT NULL,
  plugin_id     text NOT NULL REFERENCES plugin_registry.plugins (plugin_id) ON DELETE CASCADE,
  position      integer NOT NULL CHECK (position >= 0),
  assigned_by   text NOT NULL,
  assigned_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_key, plugin_id),
  UNIQUE (workspace_key, position) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX workspace_plugins_plugin ON plugin_registry.workspace_plugins (plugin_id);
