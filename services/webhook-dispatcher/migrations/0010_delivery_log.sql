-- The delivery log (GET /api/webhooks/{id}/deliveries, GET /api/webhooks/deliveries/{deliveryId}): one
-- row per delivery with its latest state, and one per attempt that reached the receiver's address (an
-- answer, a connection failure, a refused target). Written in batches by the dispatcher after each
-- attempt; kept BackendHost:WebhookDeliveryLogDays (30) and swept hourly in batches.
CREATE TABLE webhook_dispatcher.deliveries (
  delivery_id       uuid        PRIMARY KEY,
  subscription_id   uuid        NOT NULL,
  -- The subscription's workspace (null: a platform subscription): who may read the delivery.
  reach_key         text,
  -- The event's.
  workspace_key     text,
  event_name        text        NOT NULL,
  event_id          text        NOT NULL,
  status            text        NOT NULL CHECK (status IN ('delivered', 'retrying', 'failed')),
  attempts          integer     NOT NULL CHECK (attempts >= 1),
  last_status_code  integer,
  -- The body as sent (masked unless the subscription asked for sensitive data); null above 64 KiB.
  body              text,
  -- The idempotency key of the latest resend's job (POST .../resend), null before any.
  resend_job_key    text,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);
CREATE INDEX deliveries_subscription_idx
  ON webhook_dispatcher.deliveries (subscription_id, created_at DESC, delivery_id DESC);
-- The sweep's: BRIN (rows arrive in time order), a few pages to keep up to date instead of a B-tree's
-- insert per row.
CREATE INDEX deliveries_updated_idx ON webhook_dispatcher.deliveries USING brin (updated_at);

CREATE TABLE webhook_dispatcher.delivery_attempts (
  delivery_id      uuid        NOT NULL,
  -- The job's attempt number; an attempt a throttling receiver deferred is not spent, so it repeats.
  attempt          integer     NOT NULL,
  attempted_at     timestamptz NOT NULL,
  duration_ms      integer     NOT NULL,
  outcome          text        NOT NULL CHECK (outcome IN ('delivered', 'failed', 'deferred')),
  status_code      integer,
  -- The first 4 KiB of the answer's body, as text.
  response_excerpt text,
  error            text
);
CREATE INDEX delivery_attempts_delivery_idx
  ON webhook_dispatcher.delivery_attempts (delivery_id, attempted_at);
CREATE INDEX delivery_attempts_attempted_idx
  ON webhook_dispatcher.delivery_attempts USING brin (attempted_at);
