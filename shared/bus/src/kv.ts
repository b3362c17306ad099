import { type KV, Kvm, type KvOptions } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";

/**
 * Opens a KV bucket, creating it when missing. Safe from every replica at once: creating a bucket that
 * exists with the same settings binds to it.
 */
export async function ensureBucket(
  nc: NatsConnection,
  name: string,
  options: Partial<KvOptions>,
): Promise<KV> {
  const kvm = new Kvm(nc);
  try {
    return await kvm.create(name, options);
  } catch {
    return kvm.open(name);
  }
}
