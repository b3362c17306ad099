import { jetstream } from "@nats-io/jetstream";
import { type KV, Kvm, type KvOptions, type KvWatchEntry } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";

import { keepReplicas } from "./streams.js";

/**
 * Opens a KV bucket, creating it when missing, with `replicas` copies (an existing bucket is brought to
 * that number). Safe from every replica at once: creating a bucket that exists with the same settings
 * binds to it. `timeoutMs` bounds each operation on the bucket (JetStream's default is 5 s): a caller on a
 * request's path wants a quick failure while JetStream is away or still recovering after a restart, not a
 * 5 s wait.
 */
export async function ensureBucket(
  nc: NatsConnection,
  name: string,
  options: Partial<KvOptions> & { readonly replicas: number },
  timeoutMs?: number,
): Promise<KV> {
  const kvm = new Kvm(timeoutMs === undefined ? nc : jetstream(nc, { timeout: timeoutMs }));
  let kv: KV;
  try {
    kv = await kvm.create(name, options);
  } catch {
    kv = await kvm.open(name);
  }
  await keepReplicas(nc, `KV_${name}`, options.replicas);
  return kv;
}

/**
 * Follows a bucket's keys matching `key` (a subject filter, `>` for all): `onEntry` is called for each
 * value present now and for every later change (a delete or purge too: `entry.operation` says which).
 * Returns the function that stops following. A throwing `onEntry` ends nothing: the entry is skipped.
 */
export async function followKv(
  kv: KV,
  key: string,
  onEntry: (entry: KvWatchEntry) => void,
): Promise<() => void> {
  const iterator = await kv.watch({ key });
  void (async () => {
    for await (const entry of iterator as AsyncIterable<KvWatchEntry>) {
      try {
        onEntry(entry);
      } catch {
        // a malformed entry is skipped
      }
    }
  })().catch(() => undefined);
  return () => iterator.stop();
}

/**
 * The KV watches of one owner (a limiter, a cache, a settings table) that starts, starts again (a NATS
 * server that lost its store) and stops. `renew()` stops the watches there are and returns the `follow`
 * for the new start; a watch that start makes after a later `renew()` or `stop()` is stopped as it
 * arrives, so none outlives its owner, however the calls interleave with the awaits.
 */
export class KvWatches {
  private stops: Array<() => void> = [];
  private generation = 0;

  renew(): (kv: KV, key: string, onEntry: (entry: KvWatchEntry) => void) => Promise<void> {
    this.stop();
    const generation = this.generation;
    return async (kv, key, onEntry) => {
      const stop = await followKv(kv, key, onEntry);
      if (generation === this.generation) this.stops.push(stop);
      else stop();
    };
  }

  stop(): void {
    this.generation++;
    for (const stop of this.stops.splice(0)) stop();
  }
}
