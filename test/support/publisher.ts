import type { NatsConnection } from "@nats-io/transport-node";
import { connectNats, createEventPublisher, type EventPublisher, EventSource } from "@svc/bus";
import { createLogger } from "@svc/observability";

import type { Harness } from "./harness.js";

/**
 * A connection to the file's bus (with its credentials and TLS) and a publisher of platform events on it,
 * as the services publish them. The caller closes `nc`.
 */
export async function platformPublisher(h: Harness): Promise<{ nc: NatsConnection; events: EventPublisher }> {
  const nc = await connectNats({
    url: h.env.NATS_URL as string,
    auth: h.natsAuth,
    name: "publisher",
    logger: createLogger("t", "silent"),
  });
  return { nc, events: createEventPublisher(nc, h.env.SVC_SUBJECT_PREFIX as string, EventSource.Platform) };
}
