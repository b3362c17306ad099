-- The audit entries about one workspace (its chain, its theme) name it, so a workspace
-- session is shown only those; platform entries (install, activation, verification) have none.
ALTER TABLE plugin_registry.audit ADD COLUMN workspace_key text;
UPDATE plugin_registry.audit
SET workspace_key = substring(action FROM '^(?:assign|theme) ([^: ]+)')
WHERE action ~ '^(assign|theme) ';
CREATE INDEX audit_workspace ON plugin_registry.audit (workspace_key, id DESC) WHERE workspace_key IS NOT NULL;
