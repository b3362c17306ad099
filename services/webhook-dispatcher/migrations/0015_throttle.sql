-- A subscription's throttle: at most this many delivery attempts start per second, across every
-- dispatcher replica (NULL: no limit).
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN throttle_per_second integer CHECK (throttle_per_second BETWEEN 1 AND 10000);
