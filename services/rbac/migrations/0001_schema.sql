-- The rbac service owns the schema rbac. Its tables arrive with the issues that build the service.
CREATE SCHEMA IF NOT EXISTS rbac;
