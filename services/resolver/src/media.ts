/**
 * Media: the records of uploaded files, per workspace. The gateway stores the bytes
 * (content type sniffed from them, name sanitised) and forwards the upload here; `media.uploaded` and
 * `media.deleted` are recorded with the change. A workspace session sees and changes only its workspace's.
 *
 * The routes ask a `MediaTables` port (`mediaTables` is the PostgreSQL one) and the media store, so their
 * rules are unit-tested with both in memory.
 */
import { requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { mediaRoutes, PlatformEventData, RouteHandlerWith } from "@svc/contracts";
import { afterCommit, type Db, type Listing, readPage, sql, toPage } from "@svc/db";
import { NotFoundError } from "@svc/errors";
import type { MediaStore } from "@svc/media";
import type { Outbox } from "@svc/outbox";

import { keyExists } from "./repository.js";

/** A file's record. */
export interface MediaRecord {
  /** The object's name in the media store. */
  readonly id: string;
  readonly workspaceKey: string;
  readonly fileName: string;
  readonly contentType: string;
  readonly size: number;
  readonly sha256: string;
  readonly uploadedBy: string;
  readonly createdAt: Date;
}

/** The media records' tables; each change records its event with it. */
export interface MediaTables {
  workspaceExists(workspaceKey: string): Promise<boolean>;
  /** A page of the workspace's files, newest first, after `after` (created, id): one more than `limit`. */
  page(workspaceKey: string, after: readonly [string, string] | null, limit: number): Promise<MediaRecord[]>;
  find(id: string): Promise<MediaRecord | null>;
  /** Records an uploaded file with `media.uploaded`. */
  add(record: Omit<MediaRecord, "createdAt">): Promise<MediaRecord>;
  /** Deletes a file's record with `media.deleted`. */
  remove(record: MediaRecord): Promise<void>;
}

export interface MediaDeps {
  readonly records: MediaTables;
  /** The bytes (the gateway stores them; here they are checked and deleted). */
  readonly media: Pick<MediaStore, "has" | "delete">;
}

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

const recordOf = (r: MediaRow): MediaRecord => ({
  id: r.id,
  workspaceKey: r.workspace_key,
  fileName: r.file_name,
  contentType: r.content_type,
  size: Number(r.size),
  sha256: r.sha256,
  uploadedBy: r.uploaded_by,
  createdAt: r.created_at,
});

const view = (m: MediaRecord) => ({
  id: m.id,
  workspaceKey: m.workspaceKey,
  fileName: m.fileName,
  contentType: m.contentType,
  size: m.size,
  sha256: m.sha256,
  uploadedBy: m.uploadedBy,
  createdAtUtc: m.createdAt.toISOString(),
});

/** The PostgreSQL media tables; events go through `outbox`. */
export function mediaTables(db: Db, outbox: Outbox<PlatformEventData>): MediaTables {
  return {
    workspaceExists: (workspaceKey) => keyExists(db, "workspace", workspaceKey),
    async page(workspaceKey, after, limit) {
      const rows = await db.any<MediaRow>(sql`
        SELECT * FROM resolver.media
        WHERE workspace_key = ${workspaceKey}
          AND (${after === null} OR (created_at, id) < (${after?.[0] ?? null}::timestamptz, ${after?.[1] ?? null}::uuid))
        ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`);
      return rows.map(recordOf);
    },
    async find(id) {
      const row = await db.maybeOne<MediaRow>(sql`SELECT * FROM resolver.media WHERE id = ${id}`);
      return row === null ? null : recordOf(row);
    },
    add: (m) =>
      db.transaction(async (tx) => {
        const inserted = recordOf(
          await tx.one<MediaRow>(sql`
            INSERT INTO resolver.media (id, workspace_key, file_name, content_type, size, sha256, uploaded_by)
            VALUES (${m.id}, ${m.workspaceKey}, ${m.fileName}, ${m.contentType}, ${m.size}, ${m.sha256}, ${m.uploadedBy})
            RETURNING *`),
        );
        await outbox.record(tx, "media.uploaded", inserted.workspaceKey, view(inserted));
        return inserted;
      }),
    remove: (m) =>
      db.transaction(async (tx) => {
        await tx.query(sql`DELETE FROM resolver.media WHERE id = ${m.id}`);
        await outbox.record(tx, "media.deleted", m.workspaceKey, { id: m.id, workspaceKey: m.workspaceKey });
      }),
  };
}

const MEDIA: Listing = { tag: "media", kinds: ["timestamp", "uuid"] };

/** The workspace a media route means: a workspace session's own; else `workspaceKey` (default `default`). */
async function workspaceOf(
  records: MediaTables,
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
  if (!(await records.workspaceExists(key))) throw new NotFoundError(`Workspace '${key}' was not found.`);
  return key;
}

/** One file within the caller's reach, or 404. */
async function file(records: MediaTables, principal: Principal, id: string): Promise<MediaRecord> {
  const reach = requireReach(principal);
  const found = await records.find(id);
  if (found === null || (reach.kind === "workspace" && found.workspaceKey !== reach.workspaceKey)) {
    throw new NotFoundError(`Media '${id}' was not found.`);
  }
  return found;
}

type Handler<K extends keyof typeof mediaRoutes> = RouteHandlerWith<MediaDeps, (typeof mediaRoutes)[K]>;

export const listMedia: Handler<"media.list"> = async (deps, req) => {
  const wk = await workspaceOf(deps.records, req.principal, req.query.workspaceKey);
  const { limit, after } = readPage(req.query, MEDIA);
  const rows = await deps.records.page(wk, after === null ? null : [after[0] ?? "", after[1] ?? ""], limit);
  const page = toPage(rows, limit, MEDIA, (m) => [m.createdAt.toISOString(), m.id], view);
  // A file whose bytes the object store lost is not listed (it cannot be read); the cursor still pages
  // past it. When the store cannot be asked, the file is listed.
  const readable = await Promise.all(page.items.map((m) => deps.media.has(m.id).catch(() => true)));
  return { status: 200, body: { ...page, items: page.items.filter((_, i) => readable[i]) } };
};

export const uploadMedia: Handler<"media.upload"> = async (deps, req) => {
  const m = req.body.media;
  let wk: string;
  try {
    wk = await workspaceOf(deps.records, req.principal, req.query.workspaceKey);
  } catch (error) {
    // The gateway stored the bytes before asking: a refused upload leaves none behind.
    await deps.media.delete(m.objectName);
    throw error;
  }
  const added = await deps.records.add({
    id: m.objectName,
    workspaceKey: wk,
    fileName: m.fileName,
    contentType: m.contentType,
    size: m.size,
    sha256: m.sha256,
    uploadedBy: req.principal.subject,
  });
  return { status: 201, headers: { location: `/api/media/${added.id}/content` }, body: view(added) };
};

export const mediaContent: Handler<"media.content"> = async (deps, req) => {
  const found = await file(deps.records, req.principal, req.params.id);
  if (!(await deps.media.has(found.id).catch(() => true))) {
    throw new NotFoundError(
      `The bytes of media '${found.id}' are no longer stored (the object store lost them); delete it and upload the file again.`,
    );
  }
  return {
    status: 200,
    body: {
      objectName: found.id,
      fileName: found.fileName,
      contentType: found.contentType,
      size: found.size,
      sha256: found.sha256,
    },
  };
};

/** Where a deleted workspace's files' bytes go (the object store, or a test's stand-in). */
export type MediaBytes = Pick<MediaStore, "delete">;

/**
 * Deletes the bytes of files whose records a deletion took (a workspace's, a tenant's), once that
 * deletion is committed; a failure leaves unreachable bytes, never a record without them.
 */
export function deleteBytesAfterCommit(bytes: MediaBytes, ids: readonly string[]): void {
  if (ids.length === 0) return;
  afterCommit(() => {
    for (const id of ids) void bytes.delete(id).catch(() => undefined);
  });
}

export const deleteMedia: Handler<"media.delete"> = async (deps, req) => {
  const found = await file(deps.records, req.principal, req.params.id);
  await deps.records.remove(found);
  // The bytes go once the record's deletion is committed (a keyed request commits after its answer is
  // kept); a failure leaves unreachable bytes, never a record without them.
  afterCommit(() => void deps.media.delete(found.id).catch(() => undefined));
  return { status: 204 };
};
