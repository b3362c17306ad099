-- How many delivery attempts to a subscription have failed in a row, counted only while
-- BackendHost:WebhookDisableAfterFailures is set: that many turn the subscription off.
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN failing_attempts integer NOT NULL DEFAULT 0;
