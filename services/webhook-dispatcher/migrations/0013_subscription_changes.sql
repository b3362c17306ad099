-- Deliveries read a subscription from the dispatcher's memory; any change to one (through the API, by the
-- dispatcher itself, or with plain SQL) names it on this channel, and every dispatcher drops its copy.
CREATE FUNCTION webhook_dispatcher.notify_subscription_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('svc_webhook_subscription_changed', OLD.id::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER subscriptions_changed
AFTER UPDATE OR DELETE ON webhook_dispatcher.subscriptions
FOR EACH ROW EXECUTE FUNCTION webhook_dispatcher.notify_subscription_changed();
