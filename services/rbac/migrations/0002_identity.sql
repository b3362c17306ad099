-- Identity and access: users and credentials, roles and their grants, memberships and member
-- roles, the permission-key catalogue, sessions (for revocation) and integrations (API clients).

CREATE TABLE rbac.permission_keys (
  key         text        PRIMARY KEY CHECK (key = '*' OR key ~ '^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$'),
  -- 'core' or the id of the plugin that declared it.
  source      text        NOT NULL DEFAULT 'core',
  description text        NOT NULL DEFAULT ''
);

CREATE TABLE rbac.roles (
  name        text        PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9._-]{0,62}$'),
  description text        NOT NULL DEFAULT '',
  scope       text        NOT NULL DEFAULT 'platform' CHECK (scope IN ('platform', 'workspace')),
  permissions text[]      NOT NULL DEFAULT '{}',
  -- System roles (superadmin, admin, host.api) cannot be deleted; configured roles come from settings.
  source      text        NOT NULL DEFAULT 'api' CHECK (source IN ('system', 'config', 'api')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE rbac.users (
  id            uuid        PRIMARY KEY,
  user_name     text        NOT NULL CHECK (user_name ~ '^[A-Za-z0-9._@+-]{1,100}$'),
  display_name  text        NOT NULL DEFAULT '' CHECK (length(display_name) <= 200),
  email         text        CHECK (length(email) <= 320),
  password_hash text,
  is_active     boolean     NOT NULL DEFAULT true,
  -- The single global role assignment: decides platform-operator status.
  global_role   text        REFERENCES rbac.roles (name) ON DELETE SET NULL ON UPDATE CASCADE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_user_name_idx ON rbac.users (lower(user_name));

CREATE TABLE rbac.memberships (
  workspace_key text        NOT NULL,
  user_id       uuid        NOT NULL REFERENCES rbac.users (id) ON DELETE CASCADE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_key, user_id)
);
CREATE INDEX memberships_user_idx ON rbac.memberships (user_id);

CREATE TABLE rbac.membership_roles (
  workspace_key text NOT NULL,
  user_id       uuid NOT NULL,
  role          text NOT NULL REFERENCES rbac.roles (name) ON DELETE CASCADE ON UPDATE CASCADE,
  PRIMARY KEY (workspace_key, user_id, role),
  FOREIGN KEY (workspace_key, user_id) REFERENCES rbac.memberships (workspace_key, user_id) ON DELETE CASCADE
);
CREATE INDEX membership_roles_role_idx ON rbac.membership_roles (role);

-- Every issued token has a session; revoking it stops the token at every gateway.
CREATE TABLE rbac.sessions (
  id            uuid        PRIMARY KEY,
  user_id       uuid        NOT NULL REFERENCES rbac.users (id) ON DELETE CASCADE,
  workspace_key text,
  roles         text[]      NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX sessions_user_idx ON rbac.sessions (user_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_roles_idx ON rbac.sessions USING gin (roles) WHERE revoked_at IS NULL;

CREATE TABLE rbac.integrations (
  id            uuid        PRIMARY KEY,
  name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  client_id     text        NOT NULL UNIQUE,
  secret_hash   text        NOT NULL,
  workspace_key text,
  permissions   text[]      NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now()
);
