-- NATS credentials issued for external plugin backends. The secret (the user's seed) is
-- shown once and never stored: only the user's public key, who issued it, when it expires, when revoked.
CREATE TABLE plugin_registry.nats_credentials (
  credential_id uuid PRIMARY KEY,
  plugin_id     text NOT NULL,
  name          text,
  public_key    text NOT NULL UNIQUE,
  created_by    text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX nats_credentials_plugin ON plugin_registry.nats_credentials (plugin_id, created_at DESC);
