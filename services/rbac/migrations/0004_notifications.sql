-- Notifications: what the platform tells an operator who can act on it (a dead-lettered
-- job, a webhook receiver whose circuit opened, a plugin refused at re-verification). One row per user and
-- event: a redelivered event adds nothing.
CREATE TABLE rbac.notifications (
  id            uuid        PRIMARY KEY,
  user_id       uuid        NOT NULL REFERENCES rbac.users (id) ON DELETE CASCADE,
  event_id      text        NOT NULL,
  kind          text        NOT NULL,
  title         text        NOT NULL,
  detail        text,
  workspace_key text,
  data          jsonb       NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  read_at       timestamptz,
  UNIQUE (user_id, event_id)
);
CREATE INDEX notifications_inbox ON rbac.notifications (user_id, (read_at IS NOT NULL), created_at DESC, id DESC);
