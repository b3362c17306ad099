-- The event catalogue serves each event's JSON Schema and an example: a plugin's from its registry.json
-- (`eventSchemas`), stored here; the platform's own from the code (@svc/contracts, platformEvents).
ALTER TABLE webhook_dispatcher.event_catalog
  ADD COLUMN schema jsonb,
  ADD COLUMN example jsonb;
