/**
 * Archive uploads for operator routes whose contract says `upload` (plugin install): the raw body (a
 * .tgz, .tar or .zip, up to BackendHost:MaxPackageUploadBytes) goes into the NATS object store bucket
 * `<prefix>_plugin_packages` under its SHA-256, and the route forwards `{ package: { sha256, size,
 * contentType } }`: NATS messages stay small whatever the package's size, and every replica of the owning
 * service reads the same bytes. The archive may also come as the one file of a `multipart/form-data` body
 * (`curl -F package=@hello.tgz`, a browser form), within the same limit.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ErrorCode, SvcError } from "@svc/errors";
import { archiveKind } from "@svc/plugin-package";
import { PackageStore } from "@svc/plugin-package/store";
import type { FastifyInstance, FastifyRequest } from "fastify";

import { acceptOneFile, readOneFile } from "../multipart-file.js";

export const ARCHIVE_TYPES = [
  "application/gzip",
  "application/x-gzip",
  "application/x-tar",
  "application/zip",
  "application/x-zip-compressed",
  "application/octet-stream",
];

/** The archive type of a package's bytes (GZIP's magic number before a gzip-compressed tar's). */
function contentTypeOf(bytes: Buffer): string {
  const kind = archiveKind(bytes);
  if (kind === "zip") return "application/zip";
  if (kind === "tar") return bytes[0] === 0x1f ? "application/gzip" : "application/x-tar";
  return "application/octet-stream";
}

export class PackageUploads {
  private readonly store: PackageStore;

  constructor(nc: NatsConnection, prefix: string, replicas: number) {
    this.store = new PackageStore(nc, prefix, replicas);
  }

  /**
   * Accepts archive bodies as raw bytes, or as the one file of a multipart form, in `app` (an encapsulated
   * context holding only upload routes).
   */
  static async acceptArchives(app: FastifyInstance, bodyLimit: number): Promise<void> {
    app.addContentTypeParser(ARCHIVE_TYPES, { parseAs: "buffer", bodyLimit }, (_request, body, done) =>
      done(null, body),
    );
    await acceptOneFile(app, bodyLimit);
  }

  /** Stores the request's archive and returns what the route forwards. */
  async put(
    request: FastifyRequest,
    limit: number,
  ): Promise<{ package: { sha256: string; size: number; contentType: string } }> {
    const form = request.isMultipart();
    // A form's one file part, whatever the field's name; else the raw body.
    const bytes = form
      ? (
          await readOneFile(request, {
            tooLarge: `The package is larger than the upload limit (${limit} bytes).`,
            missing: "Send the package as one file of the multipart form (field `package`).",
          })
        ).bytes
      : request.body;
    if (!Buffer.isBuffer(bytes) || bytes.length === 0) {
      throw new SvcError(
        ErrorCode.BadRequest,
        `Send the package archive as the request body, with Content-Type ${ARCHIVE_TYPES.slice(0, 4).join(", ")} or application/octet-stream.`,
      );
    }
    const sha256 = await this.store.put(bytes);
    // A form's part type is often application/octet-stream whatever the file: say what the bytes are.
    const contentType = form
      ? contentTypeOf(bytes)
      : ((request.headers["content-type"] ?? "application/octet-stream").split(";")[0] as string);
    return { package: { sha256, size: bytes.length, contentType } };
  }
}
