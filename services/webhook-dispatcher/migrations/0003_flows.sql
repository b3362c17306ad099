-- Flows: a trigger (an event name pattern, matched like a subscription's) and a list
-- of actions run as one durable `flow.run` job per matching event. `actions` is the array the API took,
-- with each http action's secret sealed (AES-256-GCM) under `secretEncrypted` instead of `secret`.
CREATE TABLE webhook_dispatcher.flows (
  id            uuid        PRIMARY KEY,
  name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  workspace_key text,
  event_name    text        NOT NULL CHECK (event_name ~ '^[A-Za-z0-9_.*-]{1,120}$'),
  actions       jsonb       NOT NULL CHECK (jsonb_typeof(actions) = 'array'),
  is_active     boolean     NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX flows_match_idx ON webhook_dispatcher.flows (event_name, workspace_key) WHERE is_active;
CREATE INDEX flows_workspace_idx ON webhook_dispatcher.flows (workspace_key, created_at, id);

-- The steps of a run already done: a run resumed after a crash (its job claimed again after the lease)
-- skips them. Rows older than a week are pruned.
CREATE TABLE webhook_dispatcher.flow_steps (
  run_key      text        NOT NULL,
  step         integer     NOT NULL,
  completed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_key, step)
);
CREATE INDEX flow_steps_age_idx ON webhook_dispatcher.flow_steps (completed_at);

-- Platform events the catalogue did not list yet (flows and subscriptions may follow them too).
INSERT INTO webhook_dispatcher.event_catalog (event_name, description) VALUES
  ('job.dead-lettered', 'A background job failed for good'),
  ('webhook.circuit-opened', 'Deliveries to a webhook receiver are paused after repeated failures'),
  ('plugin.refused', 'An installed plugin failed signature re-verification'),
  ('flow.notification', 'A flow''s notify action ran (rbac turns it into notifications)')
ON CONFLICT (event_name) DO NOTHING;
