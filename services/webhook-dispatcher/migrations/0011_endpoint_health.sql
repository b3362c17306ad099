-- Endpoint health: since when every delivery to a subscription has failed (null: the last one went
-- through, or none has failed); past BackendHost:WebhookDisableAfterFailingSeconds of that the subscription
-- is turned off like a 410 does, and `disabled_reason` says which of the two it was (for the
-- webhook.disabled event, published again with it after a crash).
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN failing_since timestamptz,
  ADD COLUMN disabled_reason text;

UPDATE webhook_dispatcher.event_catalog
SET description = 'A webhook subscription was turned off: its receiver answered 410 Gone, or every delivery to it failed for too long'
WHERE event_name = 'webhook.disabled';
