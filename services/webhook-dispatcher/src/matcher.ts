/**
 * Turns published events into deliveries: a durable JetStream consumer shared by every
 * dispatcher replica reads `<prefix>.events.>`; for each event it enqueues one `webhook.deliver` job per
 * matching active subscription, with the idempotency key `<event id>:<subscription id>`, and only then
 * acknowledges. A redelivered event (a crash between enqueue and ack) enqueues nothing new, so each
 * (event, subscription) pair becomes exactly one job.
 *
 * An event whose name does not belong to its source (event-sources.ts) is dropped and counted; when the
 * verdict could change with a newer view of the installed plugins, that view is fetched once first.
 *
 * Bad input never blocks the stream: an event whose payload is not JSON, holds a NUL or an unpaired
 * surrogate, is nested too deep, or whose id or workspace header is unusable is dropped (terminated, with
 * a warning). When a batch fails, its events are retried one by one, so that one event the database
 * refuses (a data exception) is dropped alone and the others go through; other failures are redelivered.
 */
import { randomUUID } from "node:crypto";

import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  jetstreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { consumeWatched, ensureDurable, eventsSubject, Header, headerReader } from "@svc/bus";
import { type Db, isDataException, sqlState } from "@svc/db";
import { findUnsafeInput } from "@svc/errors";
import { enqueueMany } from "@svc/jobs";
import {
  type Counter,
  extractContext,
  type Logger,
  type Span,
  spanContextText,
  SpanKind,
  startSpan,
  tracingEnabled,
} from "@svc/observability";

import type { EventSources } from "./event-sources.js";
import { flowRunJob, MAX_FLOW_DEPTH } from "./flow-run.js";
import type { MatchedFlow } from "./flows.js";
import { deliverJob, deliveryJobKey } from "./jobs.js";
import { matchingSubscriptionsAndFlows } from "./scoped-tables.js";

/** The subscription a dead-lettered delivery was for (`subscriptionId` in the job reaper's event), if any. */
function aboutSubscription(event: { eventName: string; data: unknown }): string | undefined {
  if (event.eventName !== "job.dead-lettered") return undefined;
  const id = (event.data as { subscriptionId?: unknown } | null)?.subscriptionId;
  return typeof id === "string" ? id : undefined;
}

export const CONSUMER_NAME = "webhook-dispatcher";
/**
 * How long an unacknowledged event waits before redelivery: what a killed dispatcher held comes back to
 * another replica after this. A batch is matched and enqueued in milliseconds; 10 s leaves a wide margin.
 */
const ACK_WAIT_NS = 10_000_000_000;
/**
 * Events the server hands the matcher before it has acknowledged them: the backlog it can see, and so
 * take fairly from (`takeInTurns`). A workspace that floods the stream fills at most this many; the other
 * workspaces' events within them are matched first. Bounded (a few MB of events at most).
 */
const MAX_ACK_PENDING = 5_000;
/** Events matched and enqueued in one statement. */
const BATCH = 500;

/**
 * Up to `size` of `pending`, taken in turns from each workspace's events (each in its order of arrival,
 * the platform's as one more): the next batch to match. A workspace's backlog then delays another
 * workspace's events by at most its share of a batch, not by its whole length. Returns the batch and the
 * rest, in order.
 */
export function takeInTurns<T>(
  pending: readonly T[],
  size: number,
  workspaceOf: (item: T) => string | null,
): { batch: T[]; rest: T[] } {
  if (pending.length <= size) return { batch: [...pending], rest: [] };
  const queues = new Map<string | null, T[]>();
  for (const item of pending) {
    const key = workspaceOf(item);
    const queue = queues.get(key);
    if (queue === undefined) queues.set(key, [item]);
    else queue.push(item);
  }
  if (queues.size === 1) return { batch: pending.slice(0, size), rest: pending.slice(size) };
  const taken = new Set<T>();
  const lists = [...queues.values()];
  for (let round = 0; taken.size < size; round++) {
    for (const list of lists) {
      const item = list[round];
      if (item !== undefined && taken.size < size) taken.add(item);
    }
  }
  const batch: T[] = [];
  const rest: T[] = [];
  for (const item of pending) (taken.has(item) ? batch : rest).push(item);
  return { batch, rest };
}

export async function startMatcher(
  nc: NatsConnection,
  db: Db,
  options: {
    stream: string;
    prefix: string;
    log: Logger;
    sources: EventSources;
    /** Fetches the installed plugins anew (a view asked for after this call). */
    refreshPlugins: () => Promise<void>;
    dropped: Counter<"reason">;
  },
) {
  const jsm = await jetstreamManager(nc);
  const eventsPrefix = `${options.prefix}.events.`;
  /**
   * Creates the durable consumer when it is missing (at start, and after a server lost its store); true
   * when it was missing, whoever made it again (the loop then binds anew). A consumer NATS cannot say
   * anything about just now (an election) is left as it is: the call fails, and the provisioning after a
   * reconnect tries again.
   */
  const ensureConsumer = async (): Promise<boolean> => {
    const { missing, info } = await ensureDurable(jsm, options.stream, {
      durable_name: CONSUMER_NAME,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: eventsSubject(options.prefix),
      ack_wait: ACK_WAIT_NS,
      max_ack_pending: MAX_ACK_PENDING,
    });
    if (
      !missing &&
      (info.config.ack_wait !== ACK_WAIT_NS || info.config.max_ack_pending !== MAX_ACK_PENDING)
    ) {
      // A consumer made by an earlier version: bring its redelivery delay and its window in line.
      await jsm.consumers
        .update(options.stream, CONSUMER_NAME, { ack_wait: ACK_WAIT_NS, max_ack_pending: MAX_ACK_PENDING })
        .catch((err: unknown) =>
          options.log.warn({ error: (err as Error).message }, "could not update the event consumer"),
        );
    }
    return missing;
  };
  await ensureConsumer();
  let stopped = false;
  const bind = async () =>
    consumeWatched(nc, options.stream, {
      maxMessages: 200,
      log: options.log,
      name: CONSUMER_NAME,
    });
  let messages: ConsumerMessages = await bind();

  interface Parsed {
    readonly m: JsMsg;
    readonly eventName: string;
    readonly eventId: string;
    readonly workspaceKey: string | null;
    readonly occurredAtUtc: string;
    readonly data: unknown;
    /** Svc-Flow-Depth: how many flows led to this event. */
    readonly depth: number;
    /** Svc-Flow-Root: the event that started the chain of flows (this event's own id when none did). */
    readonly rootEventId: string;
    /** Svc-Event-Source: who published it (null: its name's plugin). */
    readonly source: string | null;
  }

  /** Messages already dropped: a batch handled again one by one does not drop (and count) them twice. */
  const dropped = new WeakSet<JsMsg>();
  const drop = (m: JsMsg, eventName: string, reason: string, kind: "source" | "malformed" = "malformed") => {
    dropped.add(m);
    options.dropped.labels(kind).inc();
    options.log.warn({ eventName, seq: m.seq, reason }, "dropped an event that cannot be delivered");
    settle(() => m.term());
  };

  /**
   * The events whose names belong to their sources; the others are dropped. A verdict that a newer view
   * of the installed plugins could change (a plugin installed or added to a chain just before it
   * published) is made again after fetching one, when the view is older than the event.
   */
  const admit = async (events: Parsed[]): Promise<Parsed[]> => {
    const judge = (e: Parsed) => options.sources.judge(e.eventName, e.source, e.workspaceKey);
    let verdicts = events.map(judge);
    const stale = events.some((e, i) => {
      const v = verdicts[i];
      return v?.ok === false && v.mayBeStale && options.sources.olderThan(e.m.info.timestampNanos / 1e6);
    });
    if (stale) {
      await options.refreshPlugins();
      verdicts = events.map(judge);
    }
    return events.filter((e, i) => {
      const v = verdicts[i];
      if (v === undefined || v.ok) return true;
      drop(e.m, e.eventName, v.reason, "source");
      return false;
    });
  };

  const parse = (m: JsMsg): Parsed | null => {
    const eventName = m.subject.startsWith(eventsPrefix) ? m.subject.slice(eventsPrefix.length) : m.subject;
    let parsed: Parsed;
    try {
      parsed = {
        m,
        eventName,
        eventId: m.headers?.get(Header.MsgId) || `seq-${m.seq}`,
        workspaceKey: m.headers?.get(Header.WorkspaceKey) || null,
        occurredAtUtc:
          m.headers?.get(Header.OccurredAt) ||
          new Date(Math.floor(m.info.timestampNanos / 1e6)).toISOString(),
        data: m.data.length === 0 ? {} : m.json(),
        depth: Math.max(0, Math.min(1_000, Number(m.headers?.get(Header.FlowDepth)) || 0)),
        rootEventId: "",
        source: m.headers?.get(Header.EventSource) || null,
      };
      parsed = { ...parsed, rootEventId: m.headers?.get(Header.FlowRoot) || parsed.eventId };
    } catch {
      drop(m, eventName, "the payload is not JSON");
      return null;
    }
    const unsafe = findUnsafeInput(
      {
        eventName,
        eventId: parsed.eventId,
        rootEventId: parsed.rootEventId,
        workspaceKey: parsed.workspaceKey,
        source: parsed.source,
        data: parsed.data,
      },
      "",
    );
    if (unsafe !== undefined) {
      drop(m, eventName, `${unsafe.field} ${unsafe.message}`);
      return null;
    }
    if (
      parsed.eventId.length > 200 ||
      parsed.rootEventId.length > 200 ||
      (parsed.workspaceKey?.length ?? 0) > 200 ||
      (parsed.source?.length ?? 0) > 200
    ) {
      drop(m, eventName, "the event id, workspace key or source is longer than 200 characters");
      return null;
    }
    return parsed;
  };

  /** One batch: one matching query for its distinct (name, workspace) pairs, one insert, then the acks. */
  const handleBatch = async (batch: JsMsg[]) => {
    const events = await admit(batch.map(parse).filter((e): e is Parsed => e !== null));
    const pairKey = (e: { eventName: string; workspaceKey: string | null }) =>
      `${e.eventName}\n${e.workspaceKey ?? ""}`;
    const pairs = [
      ...new Map(
        events.map((e) => [pairKey(e), { eventName: e.eventName, workspaceKey: e.workspaceKey }]),
      ).values(),
    ];
    // Flows run for events a chain of flows did not publish too deep: their pairs' flows are matched too.
    const flowEvents = events.filter((e) => e.depth < MAX_FLOW_DEPTH);
    const flowPairKeys = new Set(flowEvents.map(pairKey));
    const matched =
      pairs.length === 0
        ? { subscriptions: new Map<number, string[]>(), flows: new Map<number, MatchedFlow[]>() }
        : await matchingSubscriptionsAndFlows(
            db,
            pairs,
            new Set(pairs.flatMap((p, i) => (flowPairKeys.has(pairKey(p)) ? [i] : []))),
          );
    const byPair = new Map(pairs.map((p, i) => [pairKey(p), matched.subscriptions.get(i) ?? []]));
    // With tracing on, each event's matching is a span of the event's own trace, and the jobs it makes
    // continue that trace (the batch mixes events of many traces).
    const spans = new Map<Parsed, Span>();
    if (tracingEnabled()) {
      for (const e of events) {
        const span = startSpan("webhook-dispatcher", `match ${e.eventName}`, {
          kind: SpanKind.CONSUMER,
          parent: extractContext(headerReader(e.m)),
          attributes: {
            "messaging.system": "nats",
            "messaging.operation.type": "process",
            "messaging.message.id": e.eventId,
            "svc.subscriptions.matched": (byPair.get(pairKey(e)) ?? []).length,
            "svc.service": "webhook-dispatcher",
          },
        });
        if (span !== undefined) spans.set(e, span);
      }
    }
    const traceOf = (e: Parsed) => (spans.size === 0 ? {} : { traceContext: spanContextText(spans.get(e)) });
    const jobs = events.flatMap((e) =>
      (byPair.get(pairKey(e)) ?? [])
        // An event about a delivery to subscription S (its dead letter) is never delivered to S: a failing
        // `*` subscription would otherwise receive its own failures forever.
        .filter((subscriptionId) => subscriptionId !== aboutSubscription(e))
        .map((subscriptionId) =>
          deliverJob.request(
            {
              subscriptionId,
              deliveryId: randomUUID(),
              eventId: e.eventId,
              event: e.eventName,
              workspaceKey: e.workspaceKey,
              occurredAtUtc: e.occurredAtUtc,
              data: e.data,
            },
            {
              workspaceKey: e.workspaceKey,
              idempotencyKey: deliveryJobKey(e.eventId, subscriptionId),
              ...traceOf(e),
            },
          ),
        ),
    );
    // Flows: one run per (event, flow), unless a chain of flows published the event.
    const flowsByPair = new Map(
      pairs.map((p, i) => [pairKey(p), (matched.flows.get(i) ?? []) as MatchedFlow[]]),
    );
    const runs = flowEvents.flatMap((e) =>
      (flowsByPair.get(pairKey(e)) ?? []).map((flow) =>
        flowRunJob.request(
          {
            flowId: flow.id,
            eventId: e.eventId,
            event: e.eventName,
            workspaceKey: e.workspaceKey,
            occurredAtUtc: e.occurredAtUtc,
            data: e.data,
            depth: e.depth,
            rootEventId: e.rootEventId,
            actions: flow.actions,
          },
          { workspaceKey: e.workspaceKey, idempotencyKey: `${e.eventId}:flow:${flow.id}`, ...traceOf(e) },
        ),
      ),
    );
    try {
      if (jobs.length + runs.length > 0) await enqueueMany(db, [...jobs, ...runs]);
    } finally {
      for (const span of spans.values()) span.end();
    }
    for (const e of events) settle(() => e.m.ack());
  };

  /** An ack or nak on a closed connection throws; the server then redelivers, which is safe here. */
  const settle = (action: () => void) => {
    try {
      action();
    } catch {
      // redelivered after ack_wait; enqueueing is idempotent
    }
  };

  const handleAlone = async (m: JsMsg) => {
    try {
      await handleBatch([m]);
    } catch (err) {
      if (isDataException(err)) drop(m, m.subject, `the database refused it (${sqlState(err)})`);
      else {
        options.log.error({ err }, "could not match an event; it will be redelivered");
        settle(() => m.nak(1_000));
      }
    }
  };

  // Messages that arrive while a batch is being written join the next batch, which takes the
  // workspaces' events in turns.
  let pending: JsMsg[] = [];
  const workspaceOf = (m: JsMsg) => m.headers?.get(Header.WorkspaceKey) || null;
  let flushing: Promise<void> | undefined;
  const flush = async () => {
    try {
      await new Promise((r) => setImmediate(r));
      while (pending.length > 0) {
        const next = takeInTurns(pending, BATCH, workspaceOf);
        const batch = next.batch;
        pending = next.rest;
        try {
          await handleBatch(batch);
        } catch (err) {
          if (batch.length > 1 && isDataException(err)) {
            // One event the database refuses must not hold back the others: one by one, then.
            for (const m of batch) if (!dropped.has(m)) await handleAlone(m);
            continue;
          }
          if (isDataException(err)) {
            drop(batch[0] as JsMsg, batch[0]?.subject ?? "", `the database refused it (${sqlState(err)})`);
            continue;
          }
          // Not acknowledged: redelivered after a pause, and enqueueing is idempotent.
          options.log.error({ err, count: batch.length }, "could not match events; they will be redelivered");
          for (const m of batch) settle(() => m.nak(1_000));
        }
      }
    } finally {
      flushing = undefined;
    }
  };

  // When the consumer's message iterator ends without a stop (the consumer or its stream was deleted,
  // a server restarted without its store), bind again: to the same consumer, or to a new one.
  const loop = (async () => {
    for (;;) {
      try {
        for await (const m of messages) {
          pending.push(m);
          flushing ??= flush();
        }
      } catch (err) {
        if (!stopped) options.log.warn({ error: (err as Error).message }, "the event consumer ended");
      }
      await flushing;
      if (stopped || nc.isClosed()) return;
      await new Promise((r) => setTimeout(r, 1_000));
      try {
        await ensureConsumer();
        messages = await bind();
        options.log.info("the event consumer is bound again");
      } catch (err) {
        options.log.warn({ error: (err as Error).message }, "could not bind the event consumer; retrying");
      }
    }
  })();

  return {
    /** After a reconnect: a consumer made anew needs a new subscription, so the loop binds again. */
    async ensureConsumer() {
      if (await ensureConsumer()) await messages.close().catch(() => undefined);
    },
    async stop() {
      stopped = true;
      await messages.close().catch(() => undefined);
      await loop.catch(() => undefined);
    },
  };
}
