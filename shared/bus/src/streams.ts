import { jetstreamManager, RetentionPolicy, StorageType, type StreamConfig } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { eventsSubject } from "@svc/wire-contract";

export interface EventsStreamOptions {
  readonly name: string;
  readonly prefix: string;
  /** How long events are kept, in ms. */
  readonly maxAgeMs?: number;
  /** Window within which a repeated `Nats-Msg-Id` is dropped, in ms. */
  readonly duplicateWindowMs?: number;
  readonly replicas?: number;
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
    num_replicas: options.replicas ?? 1,
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const info = await jsm.streams.info(options.name);
      const c = info.config;
      if (
        c.subjects.join() !== wanted.subjects?.join() ||
        c.max_age !== wanted.max_age ||
        c.duplicate_window !== wanted.duplicate_window
      ) {
        await jsm.streams.update(options.name, {
          subjects: wanted.subjects ?? [],
          max_age: wanted.max_age ?? 0,
          duplicate_window: wanted.duplicate_window ?? 0,
        });
      }
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
