-- Tenants, workspaces, surfaces and snippets as an API, and the resolver's outbox for the
-- workspace events.
ALTER TABLE resolver.workspaces ADD COLUMN public_base_url text;

-- A workspace's surfaces: each with an application root and a tree of navigation items (docs/operator-guide.md).
CREATE TABLE resolver.surfaces (
  workspace_key text        NOT NULL REFERENCES resolver.workspaces (key) ON DELETE CASCADE,
  surface_key   text        NOT NULL CHECK (surface_key ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  root          jsonb       NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_key, surface_key)
);

-- Snippets: named pieces of content a workspace's surface templates use (`snippets.<key>`).
CREATE TABLE resolver.snippets (
  workspace_key text        NOT NULL REFERENCES resolver.workspaces (key) ON DELETE CASCADE,
  snippet_key   text        NOT NULL CHECK (snippet_key ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  content       text        NOT NULL CHECK (length(content) <= 65536),
  content_type  text        NOT NULL CHECK (content_type IN ('text/plain', 'text/html')),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_key, snippet_key)
);

CREATE TRIGGER surfaces_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON resolver.surfaces
  FOR EACH STATEMENT EXECUTE FUNCTION resolver.notify_resolution_changed();
CREATE TRIGGER snippets_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON resolver.snippets
  FOR EACH STATEMENT EXECUTE FUNCTION resolver.notify_resolution_changed();

-- The transactional outbox (as rbac's): workspace events recorded with the change, relayed to JetStream.
CREATE TABLE resolver.outbox (
  id            bigserial PRIMARY KEY,
  event_id      uuid        NOT NULL UNIQUE,
  event_name    text        NOT NULL,
  workspace_key text,
  occurred_at   timestamptz NOT NULL DEFAULT now(),
  payload       jsonb       NOT NULL
);
