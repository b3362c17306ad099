-- The resolver publishes tenant.deleted: the services that keep data per tenant follow
-- it durably, and it joins the catalogue like every core event.
INSERT INTO webhook_dispatcher.event_catalog (event_name, description)
VALUES ('tenant.deleted', 'A tenant is deleted (with the workspaces it had, each deleted before it)')
ON CONFLICT DO NOTHING;
