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

/** One recovery's paging job: its state is the `recoveries` row. */
export interface RecoverPayload {
  recoveryId: string;
}

/** Five attempts (then the delivery is failed for good and left in the list). */
export const deliverJob = defineJob<DeliverPayload>("webhook.deliver", { maxAttempts: 5 });

/** The idempotency key of an event's delivery to a subscription: one job per pair, however often matched. */
export const deliveryJobKey = (eventId: string, subscriptionId: string) => `${eventId}:${subscriptionId}`;

/** Pages through a recovery's failed deliveries, queuing each again; a failed page is tried again. */
export const recoverJob = defineJob<RecoverPayload>("webhook.recover", { maxAttempts: 10 });
