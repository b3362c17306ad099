/**
 * Media: the records of uploaded files, per workspace. The gateway stores the bytes
 * (content type sniffed from them, name sanitised) and forwards the upload here; `media.uploaded` and
 * `media.deleted` are recorded with the change. A workspace session sees and changes only its workspace's.
 */
import { requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { mediaRoutes, RouteHandlerWith } from "@svc/contracts";
import { afterCommit, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { NotFoundError } from "@svc/errors";
import type { MediaStore } from "@svc/media";

import type { ResolverDeps } from "./deps.js";

interface MediaRow {
  id: string;
  workspace_key: string;
  file_name: string;
  content_type: string;
  size: string;
  sha256: string;
  uploaded_by: string;
  created_at: Date;
}

const MEDIA: Listing = { tag: "media", kinds: ["timestamp", "uuid"] };

const view = (r: MediaRow) => ({
  id: r.id,
  workspaceKey: r.workspace_key,
  fileName: r.file_name,
  contentType: r.content_type,
  size: Number(r.size),
  sha256: r.sha256,
  uploadedBy: r.uploaded_by,
  createdAtUtc: r.created_at.toISOString(),
});

/** The workspace a media route means: a workspace session's own; else `workspaceKey` (default `default`). */
async function workspaceOf(
  db: Queries,
  principal: Principal,
  requested: string | undefined,
): Promise<string> {
  const reach = requireReach(principal);
  const named = requested === undefined || requested.trim() === "" ? undefined : requested.trim();
  if (reach.kind === "workspace") {
    if (named !== undefined && named !== reach.workspaceKey)
      throw new NotFoundError(`Workspace '${named}' was not found.`);
    return reach.workspaceKey;
  }
  const key = named ?? "default";
  if ((await db.maybeOne(sql`SELECT 1 AS one FROM resolver.workspaces WHERE key = ${key}`)) === null) {
    throw new NotFoundError(`Workspace '${key}' was not found.`);
  }
  return key;
}

/** One file within the caller's reach, or 404. */
async function file(db: Queries, principal: Principal, id: string): Promise<MediaRow> {
  const reach = requireReach(principal);
  const row = await db.maybeOne<MediaRow>(sql`SELECT * FROM resolver.media WHERE id = ${id}`);
  if (row === null || (reach.kind === "workspace" && row.workspace_key !== reach.workspaceKey)) {
    throw new NotFoundError(`Media '${id}' was not found.`);
  }
  return row;
}

export interface MediaDeps extends ResolverDeps {
  readonly media: MediaStore;
}

type Handler<K extends keyof typeof mediaRoutes> = RouteHandlerWith<MediaDeps, (typeof mediaRoutes)[K]>;

export const listMedia: Handler<"media.list"> = async (deps, req) => {
  const wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  const { limit, after } = readPage(req.query, MEDIA);
  const rows = await deps.db.any<MediaRow>(sql`
    SELECT * FROM resolver.media
    WHERE workspace_key = ${wk}
      AND (${after === null} OR (created_at, id) < (${after?.[0] ?? null}::timestamptz, ${after?.[1] ?? null}::uuid))
    ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`);
  const page = toPage(rows, limit, MEDIA, (r) => [r.created_at.toISOString(), r.id], view);
  // A file whose bytes the object store lost is not listed (it cannot be read); the cursor still pages
  // past it. When the store cannot be asked, the file is listed.
  const readable = await Promise.all(page.items.map((m) => deps.media.has(m.id).catch(() => true)));
  return { status: 200, body: { ...page, items: page.items.filter((_, i) => readable[i]) } };
};

export const uploadMedia: Handler<"media.upload"> = async (deps, req) => {
  const m = req.body.media;
  let wk: string;
  try {
    wk = await workspaceOf(deps.db, req.principal, req.query.workspaceKey);
  } catch (error) {
    await deps.media.delete(m.objectName);
    throw error;
  }
  const row = await deps.db.transaction(async (tx) => {
    const inserted = await tx.one<MediaRow>(sql`
      INSERT INTO resolver.media (id, workspace_key, file_name, content_type, size, sha256, uploaded_by)
      VALUES (${m.objectName}, ${wk}, ${m.fileName}, ${m.contentType}, ${m.size}, ${m.sha256}, ${req.principal.subject})
      RETURNING *`);
    await deps.outbox.record(tx, "media.uploaded", wk, view(inserted));
    return inserted;
  });
  return { status: 201, headers: { location: `/api/media/${row.id}/content` }, body: view(row) };
};

export const mediaContent: Handler<"media.content"> = async (deps, req) => {
  const row = await file(deps.db, req.principal, req.params.id);
  if (!(await deps.media.has(row.id).catch(() => true))) {
    throw new NotFoundError(
      `The bytes of media '${row.id}' are no longer stored (the object store lost them); delete it and upload the file again.`,
    );
  }
  return {
    status: 200,
    body: {
      objectName: row.id,
      fileName: row.file_name,
      contentType: row.content_type,
      size: Number(row.size),
      sha256: row.sha256,
    },
  };
};

export const deleteMedia: Handler<"media.delete"> = async (deps, req) => {
  const row = await file(deps.db, req.principal, req.params.id);
  await deps.db.transaction(async (tx) => {
    await tx.query(sql`DELETE FROM resolver.media WHERE id = ${row.id}`);
    await deps.outbox.record(tx, "media.deleted", row.workspace_key, {
      id: row.id,
      workspaceKey: row.workspace_key,
    });
  });
  // The bytes go once the record's deletion is committed (a keyed request commits after its answer is
  // kept); a failure leaves unreachable bytes, never a record without them.
  afterCommit(() => void deps.media.delete(row.id).catch(() => undefined));
  return { status: 204 };
};
