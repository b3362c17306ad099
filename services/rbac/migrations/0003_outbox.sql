-- The transactional outbox: events recorded with the change they describe, relayed to JetStream
-- by @svc/outbox and deleted once acknowledged.
CREATE TABLE rbac.outbox (
  id            bigserial PRIMARY KEY,
  event_id      uuid        NOT NULL UNIQUE,
  event_name    text        NOT NULL,
  workspace_key text,
  occurred_at   timestamptz NOT NULL DEFAULT now(),
  payload       jsonb       NOT NULL
);
