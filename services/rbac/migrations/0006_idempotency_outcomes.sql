-- The outcome of each operator write sent with an Idempotency-Key, written in the same
-- transaction as the change it answers for, so that a retry after any fault replays it
-- (shared/runtime/src/keyed-writes.ts). key: a digest of the caller and the key; fingerprint: a digest of
-- the request; status and reply, or error (a 4xx problem), once the outcome is known. Kept 24 hours.
CREATE TABLE rbac.idempotency_outcomes (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  status integer,
  reply jsonb,
  error jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotency_outcomes_created_at ON rbac.idempotency_outcomes (created_at);
