-- Custom field values: one row per entity and field; the definitions come from the
-- installed plugins (registry.json customFields). Values of a workspace or tenant go with it.
CREATE TABLE resolver.custom_field_values (
  entity_name text        NOT NULL,
  entity_id   text        NOT NULL,
  key         text        NOT NULL,
  value       text        NOT NULL CHECK (length(value) <= 2000),
  updated_by  text        NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (entity_name, entity_id, key)
);
