/**
 * The transactional outbox: an event is recorded in the same database transaction as
 * the change it describes, in the service's own `<schema>.outbox` table, and relayed to JetStream
 * afterwards, at least once, with the event id as `Nats-Msg-Id` (the stream drops a repeat inside its
 * duplicate window, and the webhook matcher is idempotent per event id beyond it). So a NATS outage of any
 * length delays events and loses none, and a crash between the change and the publish loses nothing: the
 * row is still there and the next relay pass publishes it.
 *
 * The relay runs in every replica of the service. A pass claims up to a batch of the oldest unclaimed rows
 * for a short lease in one statement (SKIP LOCKED: replicas take disjoint rows) and commits, publishes
 * them in id order, then deletes the ones JetStream acknowledged and releases the claim of the rest: no
 * transaction stays open while it waits on the network. A relay that dies leaves its
 * claim to expire (CLAIM_SECONDS) and another pass takes the rows again; a repeat publish is harmless
 * (the same `Nats-Msg-Id`). A failure stops the pass, keeps the rest, and the next pass retries. Passes
 * run on a NOTIFY sent by the recording transaction (at its commit), on a slow poll, and after a NATS
 * reconnect. Order is kept within one replica's pass; across replicas it is not guaranteed.
 */
import { randomUUID } from "node:crypto";

import type { NatsConnection } from "@nats-io/transport-node";
import {
  coalesce,
  createEventPublisher,
  EVENT_NAME_PATTERN,
  type EventPublisher,
  EventSource,
  isNatsConnected,
} from "@svc/bus";
import { type Db, type Listener, listenForNotifications, type Queries, raw, sql } from "@svc/db";
import { currentTraceContext, inSpan, type Logger, SpanKind, storedContext } from "@svc/observability";

/** How long a relay pass holds the rows it claimed; past it another pass may take them. */
export const CLAIM_SECONDS = 15;

export interface OutboxOptions {
  readonly db: Db;
  /** The service's schema, which holds the `outbox` table (migration of the service). */
  readonly schema: string;
  readonly nc: NatsConnection;
  readonly subjectPrefix: string;
  /** For the LISTEN connection. */
  readonly databaseUrl: string;
  readonly log: Logger;
  /** Backstop poll, ms. */
  readonly pollIntervalMs?: number;
  readonly batchSize?: number;
}

export interface RecordedEvent {
  readonly eventId: string;
}

interface Row {
  id: string;
  event_id: string;
  event_name: string;
  workspace_key: string | null;
  occurred_at: Date;
  payload: unknown;
  trace_context: string | null;
}

/**
 * `Events` names each event this outbox may record and its payload's type (the platform's:
 * `PlatformEventData` of `@svc/contracts`); by default any name and payload.
 */
export class Outbox<Events extends object = Record<string, unknown>> {
  private readonly table;
  private readonly channel: string;
  private readonly publisher: EventPublisher;
  private listener: Listener | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** One relay pass at a time; a wake during a pass asks for one more right after it. */
  private readonly relay = coalesce(() => this.relayAll());
  private relaying: Promise<void> | undefined;
  private stopped = false;
  /** Events relayed by this replica since start. */
  relayed = 0;

  constructor(private readonly options: OutboxOptions) {
    if (!/^[a-z_][a-z0-9_]*$/.test(options.schema)) throw new Error(`invalid schema ${options.schema}`);
    this.table = raw(`${options.schema}.outbox`);
    this.channel = `${options.schema}_outbox`;
    this.publisher = createEventPublisher(options.nc, options.subjectPrefix, EventSource.Platform);
  }

  /** Records an event inside the caller's transaction: it is published only if that transaction commits. */
  async record<N extends keyof Events & string>(
    tx: Queries,
    eventName: N,
    workspaceKey: string | null,
    payload: Events[N],
  ): Promise<RecordedEvent> {
    if (!EVENT_NAME_PATTERN.test(eventName))
      throw new Error(`invalid event name ${JSON.stringify(eventName)}`);
    const eventId = randomUUID();
    // The event keeps the trace of the change that made it (NULL when tracing is off).
    await tx.query(sql`
      INSERT INTO ${this.table} (event_id, event_name, workspace_key, payload, trace_context)
      VALUES (${eventId}, ${eventName}, ${workspaceKey}, ${JSON.stringify(payload ?? {})}::jsonb,
              ${currentTraceContext()})`);
    // Delivered at commit, not before; nothing is sent if the transaction rolls back.
    await tx.query(sql`SELECT pg_notify(${this.channel}, '')`);
    return { eventId };
  }

  async start(): Promise<void> {
    this.listener = listenForNotifications({
      databaseUrl: this.options.databaseUrl,
      channel: this.channel,
      applicationName: `${this.options.schema}-outbox`,
      log: this.options.log,
      onNotification: () => this.wake(),
      onConnected: () => this.wake(),
    });
    await this.listener.ready;
    this.timer = setInterval(() => this.wake(), this.options.pollIntervalMs ?? 2_000);
    this.timer.unref();
    void (async () => {
      for await (const status of this.options.nc.status()) if (status.type === "reconnect") this.wake();
    })().catch(() => undefined);
    this.wake();
  }

  /** Runs a relay pass now, or right after the one under way. */
  wake(): void {
    if (this.stopped) return;
    this.relaying = this.relay();
  }

  /** Passes until the table is empty or a pass fails. */
  private async relayAll(): Promise<void> {
    for (;;) {
      if (this.stopped || !isNatsConnected(this.options.nc)) return;
      let result: { relayed: number; full: boolean };
      try {
        result = await this.relayOnce();
      } catch (err) {
        this.options.log.warn({ err }, "relaying events failed; they stay recorded and are retried");
        return;
      }
      this.relayed += result.relayed;
      if (!result.full) return;
    }
  }

  /**
   * One pass: claims the oldest unclaimed events, publishes them, deletes those acknowledged and releases
   * the others. The claim and the delete are statements of their own: nothing is held open meanwhile.
   */
  async relayOnce(): Promise<{ relayed: number; full: boolean }> {
    const batchSize = this.options.batchSize ?? 100;
    const { db } = this.options;
    const claimed = await db.any<Row>(sql`
      UPDATE ${this.table} SET claimed_until = now() + make_interval(secs => ${CLAIM_SECONDS})
      WHERE id IN (
        SELECT id FROM ${this.table} WHERE claimed_until IS NULL OR claimed_until < now()
        ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)
      RETURNING id::text, event_id::text, event_name, workspace_key, occurred_at, payload, trace_context`);
    const rows = claimed.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
    const done: string[] = [];
    let failure: Error | undefined;
    for (const row of rows) {
      try {
        const publish = () =>
          this.publisher.publish(row.event_name, row.workspace_key, row.payload, {
            eventId: row.event_id,
            occurredAt: row.occurred_at,
          });
        const parent = storedContext(row.trace_context);
        // Published in a span of the recording change's trace; the event carries that context on.
        if (parent === undefined) await publish();
        else
          await inSpan(
            "outbox",
            `publish ${row.event_name}`,
            {
              kind: SpanKind.PRODUCER,
              parent,
              attributes: {
                "messaging.system": "nats",
                "messaging.operation.type": "send",
                "messaging.message.id": row.event_id,
                "svc.outbox": this.options.schema,
              },
            },
            publish,
          );
        done.push(row.id);
      } catch (err) {
        failure = err instanceof Error ? err : new Error(String(err));
        break;
      }
    }
    if (done.length > 0) await db.query(sql`DELETE FROM ${this.table} WHERE id = ANY(${done}::bigint[])`);
    const left = rows.filter((r) => !done.includes(r.id)).map((r) => r.id);
    // Released at once for the next pass (a lost connection leaves them to the lease).
    if (left.length > 0)
      await db
        .query(sql`UPDATE ${this.table} SET claimed_until = NULL WHERE id = ANY(${left}::bigint[])`)
        .catch(() => undefined);
    if (failure !== undefined && done.length === 0) throw failure;
    return { relayed: done.length, full: failure === undefined && rows.length === batchSize };
  }

  /** Events recorded and not yet relayed (for tests and the readiness of a drain). */
  async pending(): Promise<number> {
    const row = await this.options.db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM ${this.table}`);
    return row.n;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.relaying;
    await this.listener?.stop();
  }
}
