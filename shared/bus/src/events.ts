import { randomUUID } from "node:crypto";

import { jetstream } from "@nats-io/jetstream";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { injectContext } from "@svc/observability";
import { EVENT_NAME_PATTERN, eventsSubject, Header } from "@svc/wire-contract";

import { encodeJson } from "./bus.js";

export interface PublishedEvent {
  readonly eventId: string;
  readonly seq: number;
  /** True when the stream had seen this event id already (a safe re-publish). */
  readonly duplicate: boolean;
}

/**
 * The publisher contract: event name, workspace key (null: platform-wide), payload. It is an
 * interface so that plugins can decorate it (wrap `publish`). The wire form is in docs/wire-contract.md.
 */
export interface EventPublisher {
  publish(
    eventName: string,
    workspaceKey: string | null,
    payload: unknown,
    options?: PublishOptions,
  ): Promise<PublishedEvent>;
}

export interface PublishOptions {
  readonly eventId?: string;
  readonly occurredAt?: Date;
  readonly flowDepth?: number;
  readonly flowRoot?: string;
  /** `Svc-Event-Source` of this event, when not the publisher's own (the runtime publishes for plugins). */
  readonly source?: string;
}

/**
 * A publisher onto the events stream; `source` (`EventSource`) says who publishes: the webhook dispatcher
 * drops an event whose name does not belong to it.
 */
export function createEventPublisher(nc: NatsConnection, prefix: string, source: string): EventPublisher {
  const js = jetstream(nc);
  return {
    async publish(eventName, workspaceKey, payload, options = {}) {
      if (!EVENT_NAME_PATTERN.test(eventName))
        throw new Error(`invalid event name ${JSON.stringify(eventName)}`);
      const eventId = options.eventId ?? randomUUID();
      const h = natsHeaders();
      h.set(Header.EventSource, options.source ?? source);
      if (workspaceKey !== null) h.set(Header.WorkspaceKey, workspaceKey);
      h.set(Header.OccurredAt, (options.occurredAt ?? new Date()).toISOString());
      if (options.flowDepth !== undefined && options.flowDepth > 0)
        h.set(Header.FlowDepth, String(options.flowDepth));
      if (options.flowRoot !== undefined) h.set(Header.FlowRoot, options.flowRoot);
      // The current trace, when tracing is on: the event's consumers continue it.
      injectContext((name, value) => h.set(name, value));
      const ack = await js.publish(eventsSubject(prefix, eventName), encodeJson(payload ?? {}), {
        msgID: eventId,
        headers: h,
      });
      return { eventId, seq: ack.seq, duplicate: ack.duplicate };
    },
  };
}
