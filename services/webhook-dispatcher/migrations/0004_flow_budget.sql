-- Flows cannot amplify: how many events flows have published in the chain one event
-- started (its root), so that a chain stops at the budget however wide its flows are. Pruned with the
-- flow steps.
CREATE TABLE webhook_dispatcher.flow_fanout (
  root_event_id text        PRIMARY KEY,
  published     integer     NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX flow_fanout_age ON webhook_dispatcher.flow_fanout (created_at);
