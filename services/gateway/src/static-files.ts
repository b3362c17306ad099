/**
 * What the gateway's static answers share (the shells' files, plugins' UI assets and manifest, media): the
 * content type by a file's extension, a strong ETag from the bytes, and the revalidation against it.
 */
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { extname } from "node:path";

import fresh from "fresh";

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/** The content type of a file by its extension; bytes (`application/octet-stream`) for any other. */
export function contentTypeOf(path: string): string {
  return CONTENT_TYPES[extname(path).toLowerCase()] ?? "application/octet-stream";
}

/** A strong ETag for `bytes`: their SHA-256, base64url, quoted. */
export function etagOf(bytes: Uint8Array): string {
  return `"${createHash("sha256").update(bytes).digest("base64url")}"`;
}

/**
 * Whether a conditional GET may be answered 304 Not Modified: its `If-None-Match` names `etag` (RFC 9110
 * 13.1.2: a list, `*`, or the weak form a proxy makes when it compresses the answer, compared weakly as
 * a GET's is). An end-to-end reload (`Cache-Control: no-cache`) always gets the whole answer.
 */
export function notModified(headers: IncomingHttpHeaders, etag: string): boolean {
  return headers["if-none-match"] !== undefined && fresh(headers, { etag });
}
