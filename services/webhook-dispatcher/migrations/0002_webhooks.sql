-- Webhook subscriptions, the event catalogue (host events and events declared by
-- plugins) and the sensitive-field registry used for masking.
CREATE TABLE webhook_dispatcher.subscriptions (
  id                     uuid        PRIMARY KEY,
  workspace_key          text,
  event_name             text        NOT NULL CHECK (event_name ~ '^[A-Za-z0-9_.*-]{1,120}$'),
  target_url             text        NOT NULL CHECK (length(target_url) <= 2048),
  -- AES-256-GCM ciphertext of the shared secret (iv.tag.data, base64url); never returned.
  secret_encrypted       text        NOT NULL,
  is_active              boolean     NOT NULL DEFAULT true,
  include_sensitive_data boolean     NOT NULL DEFAULT false,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subscriptions_match_idx ON webhook_dispatcher.subscriptions (event_name, workspace_key) WHERE is_active;
CREATE INDEX subscriptions_workspace_idx ON webhook_dispatcher.subscriptions (workspace_key, created_at, id);

CREATE TABLE webhook_dispatcher.event_catalog (
  event_name  text PRIMARY KEY CHECK (event_name ~ '^[A-Za-z0-9_.-]{1,120}$'),
  -- 'host' or the id of the plugin that declared it.
  source      text NOT NULL DEFAULT 'host',
  description text NOT NULL DEFAULT ''
);
INSERT INTO webhook_dispatcher.event_catalog (event_name, description) VALUES
  ('user.created', 'An account is created'),
  ('user.updated', 'An account is updated'),
  ('user.deleted', 'An account is deleted'),
  ('workspace.created', 'A workspace is created'),
  ('workspace.updated', 'A workspace is updated'),
  ('workspace.deleted', 'A workspace is deleted'),
  ('workspace.member-assigned', 'A user becomes a member of a workspace'),
  ('workspace.member-removed', 'A user stops being a member of a workspace'),
  ('media.uploaded', 'A media asset is added'),
  ('media.deleted', 'A media asset is removed');

CREATE TABLE webhook_dispatcher.sensitive_fields (
  field_name text NOT NULL CHECK (length(field_name) BETWEEN 1 AND 200),
  -- 'baseline' or the id of the plugin that declared it.
  source     text NOT NULL,
  PRIMARY KEY (field_name, source)
);
INSERT INTO webhook_dispatcher.sensitive_fields (field_name, source) VALUES
  ('target', 'baseline'), ('targetValue', 'baseline'), ('targetDisplayName', 'baseline'),
  ('displayName', 'baseline'), ('email', 'baseline');
