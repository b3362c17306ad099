/** The job type the webhook dispatcher owns: one delivery of one event to one subscription. */
import { defineJob } from "@svc/jobs";

export interface DeliverPayload {
  subscriptionId: string;
  /** Generated once at enqueue; the X-Svc-Delivery header of every attempt. */
  deliveryId: string;
  eventId: string;
  event: string;
  workspaceKey: string | null;
  occurredAtUtc: string;
  data: unknown;
}

/** Five attempts (then the delivery is failed for good and left in the list). */
export const deliverJob = defineJob<DeliverPayload>("webhook.deliver", { maxAttempts: 5 });

/** The idempotency key of an event's delivery to a subscription: one job per pair, however often matched. */
export const deliveryJobKey = (eventId: string, subscriptionId: string) => `${eventId}:${subscriptionId}`;
