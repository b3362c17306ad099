-- Recoveries (POST /api/webhooks/{id}/recover): every failed delivery of a subscription in a window sent
-- again by one durable job (webhook.recover) that pages through them, a page a second; the cursor and the
-- count move in the transaction that queues each page, so a recovery interrupted anywhere resumes where it
-- stopped and sends nothing twice.
CREATE TABLE webhook_dispatcher.recoveries (
  id                  uuid        PRIMARY KEY,
  subscription_id     uuid        NOT NULL,
  -- The subscription's workspace (null: a platform subscription): who may read the recovery.
  reach_key           text,
  since               timestamptz NOT NULL,
  until               timestamptz NOT NULL,
  status              text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done')),
  queued              integer     NOT NULL DEFAULT 0,
  after_created_at    timestamptz,
  after_delivery_id   uuid,
  created_at          timestamptz NOT NULL DEFAULT now(),
  finished_at         timestamptz
);
