-- Media: uploaded files' records; the bytes are in the NATS object store <prefix>_media
-- under the id. A workspace's media go with it.
CREATE TABLE resolver.media (
  id            uuid        PRIMARY KEY,
  workspace_key text        NOT NULL REFERENCES resolver.workspaces (key) ON DELETE CASCADE,
  file_name     text        NOT NULL CHECK (length(file_name) BETWEEN 1 AND 200),
  content_type  text        NOT NULL,
  size          bigint      NOT NULL CHECK (size >= 0),
  sha256        text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  uploaded_by   text        NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX media_by_workspace ON resolver.media (workspace_key, created_at DESC, id DESC);
