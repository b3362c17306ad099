-- Why a stored plugin was refused when it was last loaded (re-verified at every start of the registry):
-- null while its package verifies with the current trust settings.
ALTER TABLE plugin_registry.plugins ADD COLUMN refused_reason text;
