-- A receiver that answers 410 Gone turns its subscription off. `disabled_at` is when (null: never turned
-- off that way, or turned off by an operator); `disabled_announced` is false from the change until the
-- `webhook.disabled` event is published (a delivery of the subscription that finds it false publishes it,
-- with the same event id, after a crash in between).
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN disabled_at timestamptz,
  ADD COLUMN disabled_announced boolean NOT NULL DEFAULT true;

INSERT INTO webhook_dispatcher.event_catalog (event_name, description) VALUES
  ('webhook.disabled', 'A webhook subscription was turned off because its receiver answered 410 Gone')
ON CONFLICT (event_name) DO NOTHING;
