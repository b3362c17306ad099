-- Headers a subscription sends with every delivery (a receiver's API key, a routing header): the names in
-- clear for the API's views, the names and values sealed like the secret (they often hold credentials).
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN header_names text[] NOT NULL DEFAULT '{}',
  ADD COLUMN headers_sealed text;
