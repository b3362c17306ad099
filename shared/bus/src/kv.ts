import { jetstream } from "@nats-io/jetstream";
import { type KV, Kvm, type KvOptions } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";

/**
 * Opens a KV bucket, creating it when missing. Safe from every replica at once: creating a bucket that
 * exists with the same settings binds to it. `timeoutMs` bounds each operation on the bucket (JetStream's
 * default is 5 s): a caller on a request's path wants a quick failure while JetStream is away or still
 * recovering after a restart, not a 5 s wait.
 */
export async function ensureBucket(
  nc: NatsConnection,
  name: string,
  options: Partial<KvOptions>,
  timeoutMs?: number,
): Promise<KV> {
  const kvm = new Kvm(timeoutMs === undefined ? nc : jetstream(nc, { timeout: timeoutMs }));
  try {
    return await kvm.create(name, options);
  } catch {
    return kvm.open(name);
  }
}
