/**
 * Uploaded media's bytes: each file in the object store `<prefix>_media` under its media id, written by
 * the gateway at upload, read by it to serve the content, deleted by the resolver with the file's record
 * (ADR 0015: the media routes are served by the resolver process, the bytes live here).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { BlobStore } from "@svc/bus";

export function mediaBucket(prefix: string): string {
  return `${prefix}_media`;
}

export class MediaStore extends BlobStore {
  constructor(nc: NatsConnection, prefix: string, replicas: number) {
    super(nc, mediaBucket(prefix), replicas);
  }
}
