/**
 * The package object store: plugin package archives in the NATS object store bucket
 * `<prefix>_plugin_packages`, each under the SHA-256 of its bytes. The gateway writes uploads there and
 * the plugin registry reads, writes and deletes; every replica sees the same bytes. A separate entry
 * (`@svc/plugin-package/store`) so that the gateway loads no archive tooling.
 */
import { createHash } from "node:crypto";

import { type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { isStreamNotFound } from "@svc/bus";

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

  constructor(nc: NatsConnection, name: string) {
    this.lazy = lazily(() => new Objm(nc).create(name, { storage: "file" }));
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

export function packageBucket(prefix: string): string {
  return `${prefix}_plugin_packages`;
}

/** Package archives, each under the SHA-256 of its bytes. */
export class PackageStore {
  private readonly blobs: BlobStore;

  constructor(nc: NatsConnection, prefix: string) {
    this.blobs = new BlobStore(nc, packageBucket(prefix));
  }

  /** Stores bytes under their SHA-256 unless they are there already; returns the hash. */
  async put(bytes: Buffer): Promise<string> {
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    if (!(await this.blobs.has(sha256))) await this.blobs.put(sha256, bytes);
    return sha256;
  }

  /** The bytes stored under `sha256`, or null when there are none. */
  get(sha256: string): Promise<Buffer | null> {
    return this.blobs.get(sha256);
  }

  delete(sha256: string): Promise<void> {
    return this.blobs.delete(sha256);
  }
}

export function assetBucket(prefix: string): string {
  return `${prefix}_plugin_assets`;
}

/**
 * The UI assets of active plugins: each file under its plugin's `ui/` directory, stored
 * by the registry as `<pluginId>/<version>/<path>` in the object store `<prefix>_plugin_assets`, where the
 * gateway reads it for `/plugin-assets/<pluginId>/<version>/<path>`. A version's files never change.
 */
export class AssetStore extends BlobStore {
  constructor(nc: NatsConnection, prefix: string) {
    super(nc, assetBucket(prefix));
  }
}

/** The KV bucket and key of the published UI-asset manifest (one value: replaced atomically). */
export const MANIFEST_BUCKET = (prefix: string) => `${prefix}_ui_manifest`;
export const MANIFEST_KEY = "plugin-ui-assets";
/**
 * Beside it: the SHA-256 (hex) of every asset the manifest may name, `{"<pluginId>/<version>/ui/…": hash}`,
 * taken from the verified package. The gateway serves an asset only when its stored
 * bytes have that hash.
 */
export const ASSET_HASHES_KEY = "plugin-ui-asset-hashes";

export function mediaBucket(prefix: string): string {
  return `${prefix}_media`;
}

/**
 * Uploaded media: each file's bytes in the object store `<prefix>_media` under its
 * media id, written by the gateway at upload, read by it to serve the content, deleted by the resolver.
 */
export class MediaStore extends BlobStore {
  constructor(nc: NatsConnection, prefix: string) {
    super(nc, mediaBucket(prefix));
  }
}
