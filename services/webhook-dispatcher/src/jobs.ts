/** The job type the webhook dispatcher owns: one delivery of one event to one subscription. */
import { defineJobType } from "@svc/jobs";

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

declare module "@svc/jobs" {
  interface JobPayloads {
    "webhook.deliver": DeliverPayload;
  }
}

/** Five attempts (then the delivery is failed for good and left in the list). */
defineJobType("webhook.deliver", { maxAttempts: 5 });
