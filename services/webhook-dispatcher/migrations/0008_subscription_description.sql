-- An operator's note on what a subscription is for (PUT /api/webhooks/{id} and create set it).
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN description text NOT NULL DEFAULT '' CHECK (length(description) <= 500);
