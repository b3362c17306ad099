-- The acting user's name beside the id (GET /api/plugins/audit's actorName), as the session named it.
ALTER TABLE plugin_registry.audit ADD COLUMN actor_name text;
