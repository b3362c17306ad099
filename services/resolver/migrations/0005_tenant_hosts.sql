-- A host belongs to one tenant. The platform assigns hosts to tenants; a workspace binds
-- only paths under its own tenant's hosts, so no tenant can take another's host under another prefix.
CREATE TABLE resolver.tenant_hosts (
  host        text        PRIMARY KEY CHECK (host = lower(host) AND length(host) BETWEEN 1 AND 253 AND host !~ ':[0-9]+$'),
  tenant_key  text        NOT NULL REFERENCES resolver.tenants (key) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tenant_hosts_tenant_key_idx ON resolver.tenant_hosts (tenant_key);

-- Hosts already bound: claimed by the tenant whose workspace bound them first.
INSERT INTO resolver.tenant_hosts (host, tenant_key)
SELECT DISTINCT ON (b.host) b.host, w.tenant_key
FROM resolver.workspace_bindings b JOIN resolver.workspaces w ON w.key = b.workspace_key
ORDER BY b.host, b.created_at, b.id
ON CONFLICT DO NOTHING;
