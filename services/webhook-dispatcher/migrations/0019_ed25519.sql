-- Standard Webhooks' asymmetric scheme, per subscription: deliveries carry a `v1a,` ed25519 signature
-- beside the `v1,` HMAC ones. The private key is sealed like the secret; the public key (`whpk_…`) is
-- shown in the subscription's views, for its receivers.
ALTER TABLE webhook_dispatcher.subscriptions
  ADD COLUMN ed25519_private_sealed text,
  ADD COLUMN ed25519_public_key text;
