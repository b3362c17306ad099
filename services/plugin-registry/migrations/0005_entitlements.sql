-- Entitlements and delegations (docs/plugins.md). A grant names a tenant (all its
-- workspaces) or one workspace; it may exist before the plugin is installed (a billing system's list), so
-- it does not reference the plugins table. `source` is `manual` for grants made with PUT
-- /api/entitlements, or the name a sync used.
CREATE TABLE plugin_registry.entitlements (
  subject_type text NOT NULL CHECK (subject_type IN ('tenant', 'workspace')),
  subject_key  text NOT NULL,
  plugin_id    text NOT NULL,
  source       text NOT NULL DEFAULT 'manual',
  expires_at   timestamptz,
  granted_by   text NOT NULL,
  granted_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (subject_type, subject_key, plugin_id)
);
CREATE INDEX entitlements_plugin ON plugin_registry.entitlements (plugin_id);
CREATE INDEX entitlements_source ON plugin_registry.entitlements (source);

-- A tenant's delegated plugins: its workspace sessions (with plugin.assign) may put these in their own chain.
CREATE TABLE plugin_registry.delegations (
  tenant_key   text NOT NULL,
  plugin_id    text NOT NULL,
  delegated_by text NOT NULL,
  delegated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_key, plugin_id)
);

-- The tenant of a chain's workspace, recorded when the chain is set (the resolver owns the mapping).
ALTER TABLE plugin_registry.workspace_plugins ADD COLUMN tenant_key text;
