-- When a turned-off subscription was last turned on again: deliveries of events that occurred before it
-- (retries queued while it was off) are not sent, unless an operator asked for them (resend, recover).
ALTER TABLE webhook_dispatcher.subscriptions ADD COLUMN resumed_at timestamptz;
