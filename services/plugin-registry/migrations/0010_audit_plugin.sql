-- One plugin's audit entries (GET /api/plugins/audit?pluginId=), newest first.
CREATE INDEX audit_plugin ON plugin_registry.audit (plugin_id, id DESC) WHERE plugin_id IS NOT NULL;
