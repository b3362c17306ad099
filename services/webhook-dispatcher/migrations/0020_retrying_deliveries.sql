-- The deliveries the log shows waiting for an attempt: what the dispatcher's settling pass reads (a
-- retrying delivery whose job was cancelled, or failed where no handler saw it, is failed), a few rows of
-- a large log.
CREATE INDEX deliveries_retrying_idx ON webhook_dispatcher.deliveries (delivery_id) WHERE status = 'retrying';
