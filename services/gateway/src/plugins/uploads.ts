/**
 * Archive uploads for operator routes whose contract says `upload` (plugin install): the raw body (a
 * .tgz, .tar or .zip, up to BackendHost:MaxPackageUploadBytes) goes into the NATS object store bucket
 * `<prefix>_plugin_packages` under its SHA-256, and the route forwards `{ package: { sha256, size,
 * contentType } }`: NATS messages stay small whatever the package's size, and every replica of the owning
 * service reads the same bytes.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ErrorCode, SvcError } from "@svc/errors";
import { PackageStore } from "@svc/plugin-package/store";
import type { FastifyInstance, FastifyRequest } from "fastify";

export const ARCHIVE_TYPES = [
  "application/gzip",
  "application/x-gzip",
  "application/x-tar",
  "application/zip",
  "application/x-zip-compressed",
  "application/octet-stream",
];

export class PackageUploads {
  private readonly store: PackageStore;

  constructor(nc: NatsConnection, prefix: string) {
    this.store = new PackageStore(nc, prefix);
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
    const sha256 = await this.store.put(bytes);
    const contentType = (request.headers["content-type"] ?? "application/octet-stream").split(
      ";",
    )[0] as string;
    return { package: { sha256, size: bytes.length, contentType } };
  }
}
