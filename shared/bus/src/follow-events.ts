/**
 * Following events durably: one durable JetStream consumer on the events stream, filtered to one event
 * name or pattern, read by every replica of a service (each event is handled by one of them). An event is
 * acknowledged once its handler has finished; a handler that fails has it redelivered after a pause, so
 * nothing published while the service was down or failing is lost. A consumer that the server lost (a
 * server restarted without its store) is made again by `ensure`.
 */
import { AckPolicy, DeliverPolicy, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "@svc/observability";
import { Header } from "@svc/wire-contract";

import { consumeWatched, ensureDurable } from "./consume.js";

export interface FollowedEvent {
  readonly eventName: string;
  readonly eventId: string;
  readonly workspaceKey: string | null;
  /** When it happened: its publisher's `Svc-Occurred-At`, else when the stream took it. */
  readonly occurredAt: Date;
  readonly data: Record<string, unknown>;
}

/** An event's `Svc-Occurred-At` (its publisher's clock), or the stream's time where it has none. */
function occurredAt(m: JsMsg): Date {
  const stated = Date.parse(m.headers?.get(Header.OccurredAt) ?? "");
  return new Date(Number.isNaN(stated) ? m.time.getTime() : stated);
}

export interface FollowEventsOptions {
  readonly stream: string;
  readonly prefix: string;
  /** The durable consumer's name, unique per service and purpose. */
  readonly durable: string;
  /** An event name or a NATS pattern over names (`workspace.*`). */
  readonly events: string;
  readonly log: Logger;
  /** How long a handler may take before the event is redelivered to another replica. */
  readonly ackWaitMs?: number;
  /** Where a new consumer starts: only events published from now on (default), or all the stream holds. */
  readonly from?: "new" | "all";
}

export interface FollowedEvents {
  /** Makes the consumer again if the server lost it, and reads from it anew. */
  ensure(): Promise<void>;
  stop(): void;
}

export async function followEvents(
  nc: NatsConnection,
  options: FollowEventsOptions,
  handle: (event: FollowedEvent) => Promise<void>,
): Promise<FollowedEvents> {
  const jsm = await jetstreamManager(nc);
  const eventsPrefix = `${options.prefix}.events.`;
  let stopped = false;
  let reading: { stop: () => void } | undefined;

  const one = async (m: JsMsg) => {
    const eventName = m.subject.startsWith(eventsPrefix) ? m.subject.slice(eventsPrefix.length) : m.subject;
    let data: Record<string, unknown>;
    try {
      const parsed: unknown = m.data.length === 0 ? {} : m.json();
      data = parsed !== null && typeof parsed === "object" ? (parsed as Record<string, unknown>) : {};
    } catch {
      options.log.warn({ eventName, seq: m.seq }, "dropped an event whose payload is not JSON");
      m.term();
      return;
    }
    try {
      await handle({
        eventName,
        eventId: m.headers?.get(Header.MsgId) || `seq-${m.seq}`,
        workspaceKey: m.headers?.get(Header.WorkspaceKey) || null,
        occurredAt: occurredAt(m),
        data,
      });
      m.ack();
    } catch (error) {
      options.log.warn({ eventName, err: error }, "could not handle an event; it is delivered again");
      m.nak(5_000);
    }
  };

  const ensure = async () => {
    const { missing } = await ensureDurable(jsm, options.stream, {
      durable_name: options.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: options.from === "all" ? DeliverPolicy.All : DeliverPolicy.New,
      filter_subject: `${eventsPrefix}${options.events}`,
      ack_wait: (options.ackWaitMs ?? 30_000) * 1_000_000,
    });
    // The consumer was there all along (a reconnect): the library goes on pulling from it.
    if (reading !== undefined && !missing) return;
    reading?.stop();
    const messages = await consumeWatched(nc, options.stream, {
      maxMessages: 50,
      log: options.log,
      name: options.durable,
    });
    reading = { stop: () => void messages.stop() };
    void (async () => {
      for await (const m of messages) {
        if (stopped) break;
        await one(m);
      }
    })().catch(() => undefined);
  };
  await ensure();
  return {
    ensure,
    stop: () => {
      stopped = true;
      reading?.stop();
    },
  };
}
