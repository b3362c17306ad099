-- The audit's retention (BackendHost:PluginAuditRetentionDays) deletes the oldest entries a batch at a time.
CREATE INDEX audit_time ON plugin_registry.audit (at);
