/**
 * The package object store: plugin package archives in the NATS object store bucket
 * `<prefix>_plugin_packages`, each under the SHA-256 of its bytes. The gateway writes uploads there and
 * the plugin registry reads, writes and deletes; every replica sees the same bytes. A separate entry
 * (`@svc/plugin-package/store`) so that the gateway loads no archive tooling.
 */
import { createHash } from "node:crypto";

import { type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";

/**
 * An object store bucket created (or opened) on first use; a failed attempt is tried again next time, and
 * `reset` forgets the handle (after a NATS reconnect the bucket may have to be created again).
 */
function lazyBucket(nc: NatsConnection, name: string) {
  let store: Promise<ObjectStore> | undefined;
  return {
    get(): Promise<ObjectStore> {
      store ??= new Objm(nc).create(name, { storage: "file" }).catch((error: unknown) => {
        store = undefined;
        throw error;
      });
      return store;
    },
    reset(): void {
      store = undefined;
    },
  };
}

export function packageBucket(prefix: string): string {
  return `${prefix}_plugin_packages`;
}

export class PackageStore {
  private readonly bucket: () => Promise<ObjectStore>;

  constructor(nc: NatsConnection, prefix: string) {
    const lazy = lazyBucket(nc, packageBucket(prefix));
    this.bucket = () => lazy.get();
  }

  /** Stores bytes under their SHA-256 unless they are there already; returns the hash. */
  async put(bytes: Buffer): Promise<string> {
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const store = await this.bucket();
    const existing = await store.info(sha256);
    if (existing === null || existing.deleted) await store.putBlob({ name: sha256 }, bytes);
    return sha256;
  }

  /** The bytes stored under `sha256`, or null when there are none. */
  async get(sha256: string): Promise<Buffer | null> {
    const bytes = await (await this.bucket()).getBlob(sha256);
    return bytes === null ? null : Buffer.from(bytes);
  }

  async delete(sha256: string): Promise<void> {
    await (await this.bucket()).delete(sha256).catch(() => undefined);
  }
}

export function assetBucket(prefix: string): string {
  return `${prefix}_plugin_assets`;
}

/**
 * The UI assets of active plugins (issue 12, item 8): each file under its plugin's `ui/` directory, stored
 * by the registry as `<pluginId>/<version>/<path>` in the object store `<prefix>_plugin_assets`, where the
 * gateway reads it for `/plugin-assets/<pluginId>/<version>/<path>`. A version's files never change.
 */
export class AssetStore {
  private readonly lazy: ReturnType<typeof lazyBucket>;

  constructor(nc: NatsConnection, prefix: string) {
    this.lazy = lazyBucket(nc, assetBucket(prefix));
  }

  private bucket(): Promise<ObjectStore> {
    return this.lazy.get();
  }

  /** Forgets the bucket handle (after a NATS reconnect, the bucket may have to be created again). */
  reset(): void {
    this.lazy.reset();
  }

  async has(name: string): Promise<boolean> {
    const info = await (await this.bucket()).info(name);
    return info !== null && !info.deleted;
  }

  async put(name: string, bytes: Uint8Array): Promise<void> {
    await (await this.bucket()).putBlob({ name }, bytes);
  }

  async get(name: string): Promise<Buffer | null> {
    const bytes = await (await this.bucket()).getBlob(name);
    return bytes === null ? null : Buffer.from(bytes);
  }
}

/** The KV bucket and key of the published UI-asset manifest (one value: replaced atomically). */
export const MANIFEST_BUCKET = (prefix: string) => `${prefix}_ui_manifest`;
export const MANIFEST_KEY = "plugin-ui-assets";

export function mediaBucket(prefix: string): string {
  return `${prefix}_media`;
}

/**
 * Uploaded media (issue 14, item 3): each file's bytes in the object store `<prefix>_media` under its
 * media id, written by the gateway at upload, read by it to serve the content, deleted by the resolver.
 */
export class MediaStore {
  private readonly lazy: ReturnType<typeof lazyBucket>;

  constructor(nc: NatsConnection, prefix: string) {
    this.lazy = lazyBucket(nc, mediaBucket(prefix));
  }

  async put(name: string, bytes: Uint8Array): Promise<void> {
    await (await this.lazy.get()).putBlob({ name }, bytes);
  }

  async get(name: string): Promise<Buffer | null> {
    const bytes = await (await this.lazy.get()).getBlob(name);
    return bytes === null ? null : Buffer.from(bytes);
  }

  async delete(name: string): Promise<void> {
    await (await this.lazy.get()).delete(name).catch(() => undefined);
  }
}
