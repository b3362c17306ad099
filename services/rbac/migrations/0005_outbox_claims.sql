-- The outbox relay claims rows for a short lease instead of holding a transaction open while it waits for
-- JetStream's acknowledgements: a claim whose relay died is taken again once it expires.
ALTER TABLE rbac.outbox ADD COLUMN claimed_until timestamptz;
