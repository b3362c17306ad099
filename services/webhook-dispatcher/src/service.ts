import { ServiceName } from "@svc/bus";
import type { ServiceDefinition } from "@svc/runtime";

/**
 * Webhook subscriptions, event matching, masking and signed delivery.
 * This foundation answers `webhook-dispatcher.ping` and owns its schema; its handlers arrive with the issues that build it.
 */
export const webhookDispatcherService: ServiceDefinition = {
  name: ServiceName.WebhookDispatcher,
  start() {
    return undefined;
  },
};
