-- A rotated secret: the one it replaced, still signing deliveries beside the new one until it expires
-- (POST /api/webhooks/{id}/secret/rotate). Past that moment it is no longer used, and the dispatcher's
-- hourly housekeeping clears it.
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN previous_secret_encrypted text,
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD CONSTRAINT subscriptions_previous_secret_whole
    CHECK ((previous_secret_encrypted IS NULL) = (previous_secret_expires_at IS NULL));
