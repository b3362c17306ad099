-- Installed plugins: one row per plugin id, the package bytes content-addressed in the NATS
-- object store <prefix>_plugin_packages under package_sha256; and the lifecycle audit.
CREATE TABLE plugin_registry.plugins (
  plugin_id          text PRIMARY KEY,
  name               text NOT NULL,
  version            text NOT NULL,
  tier               text NOT NULL CHECK (tier IN ('system', 'application')),
  contract_version   text NOT NULL,
  package_sha256     text NOT NULL CHECK (package_sha256 ~ '^[0-9a-f]{64}$'),
  signed             boolean NOT NULL,
  signer_fingerprint text,
  publisher_id       text,
  registry           jsonb NOT NULL,
  manifest           jsonb,
  is_active          boolean NOT NULL DEFAULT false,
  installed_by       text NOT NULL,
  installed_at       timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE plugin_registry.audit (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at        timestamptz NOT NULL DEFAULT now(),
  actor     text NOT NULL,
  action    text NOT NULL,
  plugin_id text,
  version   text,
  outcome   text NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
  reason    text
);
CREATE INDEX audit_at ON plugin_registry.audit (id DESC);
