-- The resolver owns tenants, workspaces and the host/path bindings that resolve a public request to a
-- workspace. Later migrations add surfaces, navigation, snippets and config to this schema.
CREATE SCHEMA IF NOT EXISTS resolver;

CREATE TABLE resolver.tenants (
  key         text        PRIMARY KEY CHECK (key ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  is_active   boolean     NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE resolver.workspaces (
  key            text        PRIMARY KEY CHECK (key ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  tenant_key     text        NOT NULL REFERENCES resolver.tenants (key) ON DELETE CASCADE,
  name           text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  type           text        NOT NULL DEFAULT 'base' CHECK (length(type) BETWEEN 1 AND 50),
  access_policy  text        NOT NULL DEFAULT 'Public' CHECK (access_policy IN ('Public', 'Authenticated')),
  is_active      boolean     NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workspaces_tenant_key_idx ON resolver.workspaces (tenant_key);

-- A workspace answers on one or more hosts, each under a path prefix ('/' for the whole host). The host is
-- stored normalised (lower case, no port); the prefix has no trailing slash except for '/'.
CREATE TABLE resolver.workspace_bindings (
  id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_key  text        NOT NULL REFERENCES resolver.workspaces (key) ON DELETE CASCADE,
  host           text        NOT NULL CHECK (host = lower(host) AND length(host) BETWEEN 1 AND 253 AND host !~ ':[0-9]+$'),
  path_prefix    text        NOT NULL DEFAULT '/' CHECK (path_prefix ~ '^/' AND (path_prefix = '/' OR path_prefix !~ '/$')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (host, path_prefix)
);
CREATE INDEX workspace_bindings_workspace_key_idx ON resolver.workspace_bindings (workspace_key);

-- Any change that can alter a resolution notifies listeners, who tell every gateway to drop its cached
-- resolutions. Statement-level, so a bulk change sends one notification.
CREATE FUNCTION resolver.notify_resolution_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('svc_resolver_changed', TG_TABLE_NAME);
  RETURN NULL;
END;
$$;

CREATE TRIGGER tenants_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON resolver.tenants
  FOR EACH STATEMENT EXECUTE FUNCTION resolver.notify_resolution_changed();
CREATE TRIGGER workspaces_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON resolver.workspaces
  FOR EACH STATEMENT EXECUTE FUNCTION resolver.notify_resolution_changed();
CREATE TRIGGER workspace_bindings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON resolver.workspace_bindings
  FOR EACH STATEMENT EXECUTE FUNCTION resolver.notify_resolution_changed();
