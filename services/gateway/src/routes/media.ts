/**
 * Media uploads and downloads at the edge. An upload is `multipart/form-data` with one
 * file (field `file`), at most BackendHost:MaxMediaUploadBytes (413 above, and nothing is stored): its
 * content type is sniffed from the bytes (never taken from the client), its name sanitised, its bytes
 * stored in the media object store under a new id, and the route forwards `{ media: {…} }` to the
 * resolver, which records it (and removes the bytes again if it refuses). A download asks the resolver for
 * the file (reach checked there) and streams the bytes with `ETag`, `Content-Length`, `Accept-Ranges`,
 * single ranges (206, 416), `Content-Disposition` and `nosniff`.
 */
import { createHash, randomUUID } from "node:crypto";

import type { NatsConnection } from "@nats-io/transport-node";
import { NotFoundError } from "@svc/errors";
import { MediaStore } from "@svc/media";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import parseRange from "range-parser";

import { acceptOneFile, readOneFile } from "../multipart-file.js";
import { notModified } from "../static-files.js";

/** A file name safe to store and to put in a header: no path, no control or reserved characters. */
export function sanitiseFileName(raw: string | undefined): string {
  const base = (raw ?? "").split(/[\\/]/).pop() ?? "";
  const cleaned = base
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f<>:"|?*]/g, "_")
    .replace(/^\.+/, "")
    .trim()
    .slice(0, 200);
  return cleaned === "" ? "file" : cleaned;
}

/**
 * The bytes' type as their signature says; text when they are UTF-8 without NUL; else octet-stream.
 * file-type (and its tokenizer) is loaded at the first upload, not with the gateway: about 1 MB that an
 * idle gateway, or one that never takes an upload, does not hold.
 */
async function sniff(bytes: Buffer): Promise<string> {
  const { fileTypeFromBuffer } = await import("file-type");
  const found = await fileTypeFromBuffer(bytes);
  if (found !== undefined) return found.mime;
  if (bytes.length > 0 && !bytes.includes(0)) {
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      return "text/plain; charset=utf-8";
    } catch {
      // not text
    }
  }
  return "application/octet-stream";
}

/** What a download of a file whose bytes the object store no longer holds says. */
export const LOST_BYTES =
  "The file's bytes are no longer stored (the object store lost them); delete the file and upload it again.";

export class MediaTransfers {
  private readonly objects: MediaStore;

  constructor(nc: NatsConnection, prefix: string, replicas: number) {
    this.objects = new MediaStore(nc, prefix, replicas);
  }

  /** Accepts multipart uploads of one file in `app` (an encapsulated context holding only media uploads). */
  static async acceptUploads(app: FastifyInstance, limit: number): Promise<void> {
    await acceptOneFile(app, limit);
  }

  /**
   * Reads the one uploaded file of a multipart request (bounded by the upload limit) and describes it:
   * size, sniffed content type, sanitised name and content hash. Nothing is stored yet.
   */
  async read(request: FastifyRequest) {
    const { bytes, filename } = await readOneFile(request, {
      tooLarge: "The file is larger than the media upload limit.",
      missing: "Send one file as multipart/form-data (field `file`).",
    });
    const contentType = await sniff(bytes);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    return {
      bytes,
      described: { size: bytes.length, contentType, fileName: sanitiseFileName(filename), sha256 },
    };
  }

  /** Stores a read file's bytes under a new object name, which the upload's forwarded body carries. */
  async store(bytes: Buffer): Promise<string> {
    const objectName = randomUUID();
    await this.objects.put(objectName, bytes);
    return objectName;
  }

  /** Removes stored bytes no record will point to (an upload that did not complete). */
  async remove(objectName: string): Promise<void> {
    await this.objects.delete(objectName);
  }

  /** Sends a stored file's bytes (the resolver described it and checked the caller's reach). */
  async send(
    request: FastifyRequest,
    reply: FastifyReply,
    file: { objectName: string; fileName: string; contentType: string; size: number; sha256: string },
  ) {
    const etag = `"${file.sha256}"`;
    void reply
      .header("etag", etag)
      .header("accept-ranges", "bytes")
      .header("cache-control", "private, no-cache")
      .header("x-content-type-options", "nosniff")
      .header(
        "content-disposition",
        `attachment; filename="${file.fileName.replace(/[^\x20-\x7e]|"/g, "_")}"; filename*=UTF-8''${encodeURIComponent(file.fileName)}`,
      );
    if (notModified(request.headers, etag)) return reply.code(304).send();
    const bytes = await this.objects.get(file.objectName);
    if (bytes === null) throw new NotFoundError(LOST_BYTES);
    const range = request.headers.range;
    if (typeof range === "string") {
      const ranges = parseRange(bytes.length, range, { combine: true });
      if (ranges === -1) {
        return reply.code(416).header("content-range", `bytes */${bytes.length}`).send();
      }
      if (ranges !== -2 && ranges.type === "bytes" && ranges.length === 1) {
        const r = ranges[0] as { start: number; end: number };
        return reply
          .code(206)
          .type(file.contentType)
          .header("content-range", `bytes ${r.start}-${r.end}/${bytes.length}`)
          .header("content-length", r.end - r.start + 1)
          .send(bytes.subarray(r.start, r.end + 1));
      }
    }
    return reply.code(200).type(file.contentType).header("content-length", bytes.length).send(bytes);
  }
}
