/**
 * The media routes: uploaded files per workspace (the bytes in the media object store, @svc/media; the
 * records in the resolver's tables). Served by the resolver process under its subjects
 * (`resolver.media.*`, ADR 0015), declared here under their own name.
 */
import { Type } from "@sinclair/typebox";

import { Page, pageFields } from "./common.js";
import { WorkspaceQuery } from "./resolver.js";
import { defineRoutes } from "./route.js";

export const MediaView = Type.Object({
  id: Type.String(),
  workspaceKey: Type.String(),
  fileName: Type.String(),
  /** Sniffed from the bytes, never taken from the client. */
  contentType: Type.String(),
  size: Type.Integer(),
  sha256: Type.String(),
  uploadedBy: Type.String(),
  createdAtUtc: Type.String(),
});
export const StoredFile = Type.Object({
  objectName: Type.String(),
  fileName: Type.String(),
  contentType: Type.String(),
  size: Type.Integer(),
  sha256: Type.String(),
});

export const mediaRoutes = defineRoutes("resolver", {
  "media.list": {
    method: "GET",
    path: "/api/media",
    permission: "media.read",
    summary: "A workspace's media, newest first (a workspace session: its own)",
    query: Type.Object(
      { workspaceKey: Type.Optional(Type.String({ maxLength: 63 })), ...pageFields },
      { additionalProperties: false },
    ),
    reply: Page(MediaView),
  },
  "media.content": {
    method: "GET",
    path: "/api/media/:id/content",
    permission: "media.read",
    download: true,
    summary: "The file's bytes (ETag, ranges, Content-Disposition)",
    params: Type.Object({ id: Type.String({ format: "uuid" }) }),
    reply: StoredFile,
  },
  "media.upload": {
    method: "POST",
    path: "/api/media",
    permission: "media.manage",
    upload: "media",
    summary: "Upload one file (multipart/form-data, field `file`) to a workspace (`?workspaceKey=`)",
    query: WorkspaceQuery,
    body: Type.Object({
      media: Type.Object({
        objectName: Type.String({ format: "uuid" }),
        size: Type.Integer({ minimum: 0 }),
        contentType: Type.String({ maxLength: 200 }),
        fileName: Type.String({ minLength: 1, maxLength: 200 }),
        sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
      }),
    }),
    reply: MediaView,
  },
  "media.delete": {
    method: "DELETE",
    path: "/api/media/:id",
    permission: "media.manage",
    summary: "Delete a file",
    params: Type.Object({ id: Type.String({ format: "uuid" }) }),
  },
});
