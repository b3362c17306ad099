-- The plugin-registry service owns the schema plugin_registry. Its tables arrive with the issues that build the service.
CREATE SCHEMA IF NOT EXISTS plugin_registry;
