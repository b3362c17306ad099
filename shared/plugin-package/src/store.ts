/**
 * The package object store: plugin package archives in the NATS object store bucket
 * `<prefix>_plugin_packages`, each under the SHA-256 of its bytes. The gateway writes uploads there and
 * the plugin registry reads, writes and deletes; every replica sees the same bytes. A separate entry
 * (`@svc/plugin-package/store`) so that the gateway loads no archive tooling.
 */
import { createHash } from "node:crypto";

import { type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";

export function packageBucket(prefix: string): string {
  return `${prefix}_plugin_packages`;
}

export class PackageStore {
  private store: Promise<ObjectStore> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
  ) {}

  /** The bucket, created on first use (a failed attempt is tried again next time). */
  private bucket(): Promise<ObjectStore> {
    this.store ??= new Objm(this.nc)
      .create(packageBucket(this.prefix), { storage: "file" })
      .catch((error) => {
        this.store = undefined;
        throw error;
      });
    return this.store;
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
