/**
 * Archive uploads for operator routes whose contract says `upload` (plugin install): the raw body (a
 * .tgz, .tar or .zip, up to BackendHost:MaxPackageUploadBytes) goes into the NATS object store bucket
 * `<prefix>_plugin_packages` under its SHA-256, and the route forwards `{ package: { sha256, size,
 * contentType } }`: NATS messages stay small whatever the package's size, and every replica of the owning
 * service reads the same bytes. The archive may also come as the one file of a `multipart/form-data` body
 * (`curl -F package=@hello.tgz`, a browser form), within the same limit (issue 22, item 8).
 */
import multipart from "@fastify/multipart";
import type { NatsConnection } from "@nats-io/transport-node";
import { ErrorCode, SvcError } from "@svc/errors";
import { archiveKind } from "@svc/plugin-package";
import { PackageStore } from "@svc/plugin-package/store";
import type { FastifyInstance, FastifyRequest } from "fastify";

import { readOneFile } from "./multipart-file.js";

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

  /**
   * Accepts archive bodies as raw bytes, or as the one file of a multipart form, in `app` (an encapsulated
   * context holding only upload routes).
   */
  static async acceptArchives(app: FastifyInstance, bodyLimit: number): Promise<void> {
    app.addContentTypeParser(ARCHIVE_TYPES, { parseAs: "buffer", bodyLimit }, (_request, body, done) =>
      done(null, body),
    );
    await app.register(multipart, {
      limits: { fileSize: bodyLimit, files: 1, fields: 5, parts: 6, fieldSize: 1_000 },
    });
  }

  /** The archive of a multipart request: its one file part, whatever the field's name. */
  private async fromMultipart(request: FastifyRequest, limit: number): Promise<Buffer> {
    const { bytes } = await readOneFile(request, {
      tooLarge: `The package is larger than the upload limit (${limit} bytes).`,
      missing: "Send the package as one file of the multipart form (field `package`).",
    });
    return bytes;
  }

  /** Stores the request's archive and returns what the route forwards. */
  async put(
    request: FastifyRequest,
    limit: number,
  ): Promise<{ package: { sha256: string; size: number; contentType: string } }> {
    const bytes = request.isMultipart() ? await this.fromMultipart(request, limit) : request.body;
    if (!Buffer.isBuffer(bytes) || bytes.length === 0) {
      throw new SvcError(
        ErrorCode.BadRequest,
        `Send the package archive as the request body, with Content-Type ${ARCHIVE_TYPES.slice(0, 4).join(", ")} or application/octet-stream.`,
      );
    }
    const sha256 = await this.store.put(bytes);
    const kind = archiveKind(bytes);
    // What the bytes are (a form's part type is often application/octet-stream whatever the file).
    const contentType = request.isMultipart()
      ? kind === "zip"
        ? "application/zip"
        : kind === "tar"
          ? bytes[0] === 0x1f
            ? "application/gzip"
            : "application/x-tar"
          : "application/octet-stream"
      : ((request.headers["content-type"] ?? "application/octet-stream").split(";")[0] as string);
    return { package: { sha256, size: bytes.length, contentType } };
  }
}
