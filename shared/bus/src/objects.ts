/** Named blobs in a NATS object store bucket (plugin packages, their UI assets, uploaded media). */
import { type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";

import { isStreamNotFound, keepReplicas } from "./streams.js";

/**
 * A handle (a bucket) opened on first use; a failed attempt is tried again next time, and `reset` forgets
 * the handle (after a NATS reconnect the bucket may have to be created again).
 */
export function lazily<T>(open: () => Promise<T>) {
  let handle: Promise<T> | undefined;
  return {
    get(): Promise<T> {
      handle ??= open().catch((error: unknown) => {
        handle = undefined;
        throw error;
      });
      return handle;
    },
    reset(): void {
      handle = undefined;
    },
  };
}

/** Named blobs in one object store bucket, opened (or created) on first use. */
export class BlobStore {
  private readonly lazy: ReturnType<typeof lazily<ObjectStore>>;

  /** `replicas`: copies of the bucket (BackendHost:NatsReplicas); an existing one is brought to it. */
  constructor(nc: NatsConnection, name: string, replicas: number) {
    this.lazy = lazily(async () => {
      const store = await new Objm(nc).create(name, { storage: "file", replicas });
      await keepReplicas(nc, `OBJ_${name}`, replicas);
      return store;
    });
  }

  /** Forgets the bucket handle (after a NATS reconnect, the bucket may have to be created again). */
  reset(): void {
    this.lazy.reset();
  }

  /**
   * The bucket's stream is gone (NATS lost its store): what it held is not there. The handle is forgotten,
   * so the next use creates the bucket again.
   */
  private gone(error: unknown): boolean {
    const lost = isStreamNotFound(error);
    if (lost) this.lazy.reset();
    return lost;
  }

  async has(name: string): Promise<boolean> {
    try {
      const info = await (await this.lazy.get()).info(name);
      return info !== null && !info.deleted;
    } catch (error) {
      if (this.gone(error)) return false;
      throw error;
    }
  }

  async put(name: string, bytes: Uint8Array): Promise<void> {
    await (await this.lazy.get()).putBlob({ name }, bytes);
  }

  /** The bytes stored under `name`, or null when there are none. */
  async get(name: string): Promise<Buffer | null> {
    try {
      const bytes = await (await this.lazy.get()).getBlob(name);
      return bytes === null ? null : Buffer.from(bytes);
    } catch (error) {
      if (this.gone(error)) return null;
      throw error;
    }
  }

  async delete(name: string): Promise<void> {
    await (await this.lazy.get()).delete(name).catch(() => undefined);
  }
}
