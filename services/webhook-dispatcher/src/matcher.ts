/**
 * Turns published events into deliveries (spec 6.2): a durable JetStream consumer shared by every
 * dispatcher replica reads `<prefix>.events.>`; for each event it enqueues one `webhook.deliver` job per
 * matching active subscription, with the idempotency key `<event id>:<subscription id>`, and only then
 * acknowledges. A redelivered event (a crash between enqueue and ack) enqueues nothing new, so each
 * (event, subscription) pair becomes exactly one job.
 */
import { randomUUID } from "node:crypto";

import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { eventsSubject, Header } from "@svc/bus";
import type { Db } from "@svc/db";
import { enqueueMany } from "@svc/jobs";
import type { Logger } from "@svc/observability";

import { matchingSubscriptions } from "./subscriptions.js";

export const CONSUMER_NAME = "webhook-dispatcher";

export async function startMatcher(
  nc: NatsConnection,
  db: Db,
  options: { stream: string; prefix: string; log: Logger },
) {
  const jsm = await jetstreamManager(nc);
  const eventsPrefix = `${options.prefix}.events.`;
  try {
    await jsm.consumers.info(options.stream, CONSUMER_NAME);
  } catch {
    await jsm.consumers
      .add(options.stream, {
        durable_name: CONSUMER_NAME,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: eventsSubject(options.prefix),
        ack_wait: 30_000_000_000,
        max_ack_pending: 1_000,
      })
      .catch(async (error: unknown) => {
        // Another replica created it meanwhile.
        await jsm.consumers.info(options.stream, CONSUMER_NAME).catch(() => {
          throw error;
        });
      });
  }
  const consumer = await jetstream(nc).consumers.get(options.stream, CONSUMER_NAME);
  const messages: ConsumerMessages = await consumer.consume({ max_messages: 200 });

  const handle = async (m: JsMsg) => {
    const eventName = m.subject.startsWith(eventsPrefix) ? m.subject.slice(eventsPrefix.length) : m.subject;
    const eventId = m.headers?.get(Header.MsgId) || `seq-${m.seq}`;
    const workspaceKey = m.headers?.get(Header.WorkspaceKey) || null;
    const occurredAtUtc =
      m.headers?.get(Header.OccurredAt) || new Date(Math.floor(m.info.timestampNanos / 1e6)).toISOString();
    let data: unknown;
    try {
      data = m.data.length === 0 ? {} : m.json();
    } catch {
      options.log.warn({ eventName, eventId }, "ignored an event whose payload is not JSON");
      m.term();
      return;
    }
    const subscriptions = await matchingSubscriptions(db, eventName, workspaceKey);
    if (subscriptions.length > 0) {
      await enqueueMany(
        db,
        subscriptions.map((subscriptionId) => ({
          type: "webhook.deliver" as const,
          workspaceKey,
          idempotencyKey: `${eventId}:${subscriptionId}`,
          payload: {
            subscriptionId,
            deliveryId: randomUUID(),
            eventId,
            event: eventName,
            workspaceKey,
            occurredAtUtc,
            data,
          },
        })),
      );
    }
    m.ack();
  };

  const loop = (async () => {
    for await (const m of messages) {
      try {
        await handle(m);
      } catch (err) {
        // Not acknowledged: redelivered after ack_wait, and enqueueing is idempotent.
        options.log.error({ err, subject: m.subject }, "could not match an event; it will be redelivered");
        m.nak(1_000);
      }
    }
  })();

  return {
    async stop() {
      await messages.close().catch(() => undefined);
      await loop.catch(() => undefined);
    },
  };
}
