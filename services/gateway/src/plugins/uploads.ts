/**
 * Archive uploads for operator routes whose contract says `upload` (plugin install): the raw body (a
 * .tgz, .tar or .zip, up to BackendHost:MaxPackageUploadBytes) goes into the NATS object store bucket
 * `<prefix>_plugin_packages` under its SHA-256, and the route forwards `{ package: { sha256, size,
 * contentType } }`: NATS messages stay small whatever the package's size, and every replica of the owning
 * service reads the same bytes.
 */
import { createHash } from "node:crypto";

import { type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { ErrorCode, SvcError } from "@svc/errors";
import type { FastifyInstance, FastifyRequest } from "fastify";

export const ARCHIVE_TYPES = [
  "application/gzip",
  "application/x-gzip",
  "application/x-tar",
  "application/zip",
  "application/x-zip-compressed",
  "application/octet-stream",
];

export function packageBucket(prefix: string): string {
  return `${prefix}_plugin_packages`;
}

export class PackageUploads {
  private store: Promise<ObjectStore> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
  ) {}

  private bucket(): Promise<ObjectStore> {
    this.store ??= new Objm(this.nc)
      .create(packageBucket(this.prefix), { storage: "file" })
      .catch((error) => {
        this.store = undefined;
        throw error;
      });
    return this.store;
  }

  /** Accepts archive bodies as raw bytes in `app` (an encapsulated context holding only upload routes). */
  static acceptArchives(app: FastifyInstance, bodyLimit: number): void {
    app.addContentTypeParser(ARCHIVE_TYPES, { parseAs: "buffer", bodyLimit }, (_request, body, done) =>
      done(null, body),
    );
  }

  /** Stores the request's archive and returns what the route forwards. */
  async put(
    request: FastifyRequest,
  ): Promise<{ package: { sha256: string; size: number; contentType: string } }> {
    const bytes = request.body;
    if (!Buffer.isBuffer(bytes) || bytes.length === 0) {
      throw new SvcError(
        ErrorCode.BadRequest,
        `Send the package archive as the request body, with Content-Type ${ARCHIVE_TYPES.slice(0, 4).join(", ")} or application/octet-stream.`,
      );
    }
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const store = await this.bucket();
    const existing = await store.info(sha256);
    if (existing === null || existing.deleted) await store.putBlob({ name: sha256 }, bytes);
    const contentType = (request.headers["content-type"] ?? "application/octet-stream").split(
      ";",
    )[0] as string;
    return { package: { sha256, size: bytes.length, contentType } };
  }
}
