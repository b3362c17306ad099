/**
 * The package object store: plugin package archives in the NATS object store bucket
 * `<prefix>_plugin_packages`, each under the SHA-256 of its bytes. The gateway writes uploads there and
 * the plugin registry reads, writes and deletes; every replica sees the same bytes. A separate entry
 * (`@svc/plugin-package/store`) so that the gateway loads no archive tooling.
 */
import { createHash } from "node:crypto";

import type { NatsConnection } from "@nats-io/transport-node";
import { BlobStore } from "@svc/bus";

export function packageBucket(prefix: string): string {
  return `${prefix}_plugin_packages`;
}

/** Package archives, each under the SHA-256 of its bytes. */
export class PackageStore {
  private readonly blobs: BlobStore;

  constructor(nc: NatsConnection, prefix: string, replicas: number) {
    this.blobs = new BlobStore(nc, packageBucket(prefix), replicas);
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
  constructor(nc: NatsConnection, prefix: string, replicas: number) {
    super(nc, assetBucket(prefix), replicas);
  }

  override has(name: string): Promise<boolean> {
    return super.has(assetObjectName(name));
  }

  override put(name: string, bytes: Uint8Array): Promise<void> {
    return super.put(assetObjectName(name), bytes);
  }

  override get(name: string): Promise<Buffer | null> {
    return super.get(assetObjectName(name));
  }

  override delete(name: string): Promise<void> {
    return super.delete(assetObjectName(name));
  }
}

/**
 * The object name an asset is stored under. NATS object names travel in a message header, which holds
 * Latin-1 only: a file named `Ａ.txt` or with an emoji is stored under `_utf8/<its name in base64url>`
 * (no plugin id starts with `_`, so no Latin-1 name is ever that); every other name as it is.
 */
export function assetObjectName(name: string): string {
  // eslint-disable-next-line no-control-regex
  return /^[\u0000-\u00ff]*$/.test(name) ? name : `_utf8/${Buffer.from(name, "utf8").toString("base64url")}`;
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
