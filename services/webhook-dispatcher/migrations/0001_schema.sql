-- The webhook-dispatcher service owns the schema webhook_dispatcher. Its tables arrive with the issues that build the service.
CREATE SCHEMA IF NOT EXISTS webhook_dispatcher;
