import {
  type JetStreamManager,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { eventsSubject } from "@svc/wire-contract";

export interface EventsStreamOptions {
  readonly name: string;
  readonly prefix: string;
  /** How long events are kept, in ms. */
  readonly maxAgeMs?: number;
  /** Window within which a repeated `Nats-Msg-Id` is dropped, in ms. */
  readonly duplicateWindowMs?: number;
  /** Copies kept (BackendHost:NatsReplicas); an existing stream is brought to it. */
  readonly replicas: number;
}

const NS_PER_MS = 1_000_000;

/**
 * Creates the events stream, or brings an existing one to the wanted subjects and limits. Safe to call
 * from every replica at every start: concurrent creators converge on the same stream.
 */
export async function ensureEventsStream(nc: NatsConnection, options: EventsStreamOptions): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const wanted: Partial<StreamConfig> & { name: string } = {
    name: options.name,
    subjects: [eventsSubject(options.prefix)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: (options.maxAgeMs ?? 7 * 24 * 3_600_000) * NS_PER_MS,
    duplicate_window: (options.duplicateWindowMs ?? 120_000) * NS_PER_MS,
    num_replicas: options.replicas,
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const info = await jsm.streams.info(options.name);
      const c = info.config;
      if (
        c.subjects.join() !== wanted.subjects?.join() ||
        c.max_age !== wanted.max_age ||
        c.duplicate_window !== wanted.duplicate_window ||
        c.num_replicas !== wanted.num_replicas
      ) {
        await jsm.streams.update(options.name, {
          subjects: wanted.subjects ?? [],
          max_age: wanted.max_age ?? 0,
          duplicate_window: wanted.duplicate_window ?? 0,
          num_replicas: options.replicas,
        });
        if (c.num_replicas !== wanted.num_replicas) await settled(jsm, options.name, options.replicas);
      }
      await keepConsumerReplicas(jsm, options.name, options.replicas);
      return;
    } catch (error) {
      if (!isStreamNotFound(error)) throw error;
    }
    try {
      await jsm.streams.add(wanted);
      return;
    } catch (error) {
      // Another replica created it between our info and add: read it again.
      if (attempt === 2) throw error;
    }
  }
}

/**
 * Brings an existing stream (a KV bucket's `KV_<name>`, an object store's `OBJ_<name>`) to `replicas`
 * copies: NATS moves a clustered stream to more or fewer peers in place, keeping what it holds.
 */
export async function keepReplicas(nc: NatsConnection, stream: string, replicas: number): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream);
  if (info.config.num_replicas === replicas) return;
  await jsm.streams.update(stream, { num_replicas: replicas });
  await settled(jsm, stream, replicas);
}

/**
 * Brings the stream's durable consumers to `replicas` copies. A consumer takes the stream's number when it
 * is made and keeps it when the stream's changes: one made while the stream had one copy stalls (no
 * quorum) when its node goes, though the stream lives on.
 */
async function keepConsumerReplicas(jsm: JetStreamManager, stream: string, replicas: number): Promise<void> {
  for await (const consumer of jsm.consumers.list(stream)) {
    const durable = consumer.config.durable_name;
    if (durable === undefined || consumer.cluster === undefined) continue;
    if (1 + (consumer.cluster.replicas ?? []).length === replicas) continue;
    await jsm.consumers.update(stream, durable, { num_replicas: replicas });
  }
}

/**
 * Until a stream that changed peers has a leader again and its copies caught up (30 s at most): a write
 * in between finds no responder. Past the limit the caller goes on; the shortfall shows in the storage
 * check (`storageShortfalls`).
 */
async function settled(jsm: JetStreamManager, stream: string, replicas: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const cluster = (await jsm.streams.info(stream).catch(() => undefined))?.cluster;
    if (
      cluster?.leader !== undefined &&
      1 + (cluster.replicas ?? []).filter((r) => r.current).length >= replicas
    )
      return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Whether a JetStream error says the stream does not exist: the API's error, or the object store's and
 * KV's own errors that only say so in their message.
 */
export function isStreamNotFound(error: unknown): boolean {
  const e = error as {
    name?: string;
    code?: number;
    message?: unknown;
    apiError?: () => { err_code?: number };
  };
  return (
    e?.name === "StreamNotFoundError" ||
    e?.apiError?.()?.err_code === 10059 ||
    (typeof e?.message === "string" && /stream not found/i.test(e.message))
  );
}
