/**
 * Media records through their contracts, with the records and the media store in memory: no NATS, no
 * PostgreSQL. A workspace session sees and changes only its workspace's files; a refused upload leaves no
 * bytes behind; a file whose bytes the store lost is not listed and its content is a 404; a deletion
 * removes the record, then the bytes.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, mediaRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  deleteMedia,
  listMedia,
  mediaContent,
  type MediaRecord,
  type MediaTables,
  uploadMedia,
} from "./media.js";

class MemoryMedia implements MediaTables {
  readonly workspaces = new Set(["default", "shop", "news"]);
  readonly records = new Map<string, MediaRecord>();
  readonly events: string[] = [];
  private clock = 0;

  async workspaceExists(workspaceKey: string) {
    return this.workspaces.has(workspaceKey);
  }
  async page(workspaceKey: string, after: readonly [string, string] | null, limit: number) {
    const key = (m: MediaRecord) => `${m.createdAt.toISOString()} ${m.id}`;
    return [...this.records.values()]
      .filter(
        (m) => m.workspaceKey === workspaceKey && (after === null || key(m) < `${after[0]} ${after[1]}`),
      )
      .sort((a, b) => (key(a) < key(b) ? 1 : -1))
      .slice(0, limit + 1);
  }
  async find(id: string) {
    return this.records.get(id) ?? null;
  }
  async add(m: Omit<MediaRecord, "createdAt">) {
    const record = { ...m, createdAt: new Date(Date.UTC(2026, 0, 1) + this.clock++ * 1_000) };
    this.records.set(m.id, record);
    this.events.push(`media.uploaded ${m.id}`);
    return record;
  }
  async remove(m: MediaRecord) {
    this.records.delete(m.id);
    this.events.push(`media.deleted ${m.id}`);
  }
}

/** The media store's objects (the gateway put them before asking). */
class MemoryStore {
  readonly objects = new Set<string>();
  unreachable = false;
  async has(name: string) {
    if (this.unreachable) throw new Error("the object store does not answer");
    return this.objects.has(name);
  }
  async delete(name: string) {
    this.objects.delete(name);
  }
}

const operator = caller(["media.read", "media.manage"]);
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let records: MemoryMedia;
let store: MemoryStore;
const deps = () => ({ records, media: store });
beforeEach(() => {
  records = new MemoryMedia();
  store = new MemoryStore();
});

let n = 0;
const upload = (principal = operator, workspaceKey?: string) => {
  const objectName = `00000000-0000-4000-8000-${String(++n).padStart(12, "0")}`;
  store.objects.add(objectName);
  return callRoute(mediaRoutes["media.upload"], (req) => uploadMedia(deps(), req), {
    principal,
    params: {},
    query: workspaceKey === undefined ? {} : { workspaceKey },
    body: {
      media: { objectName, fileName: "logo.png", contentType: "image/png", size: 68, sha256: "a".repeat(64) },
    },
  });
};
const list = (principal = operator, query: Record<string, string | number> = {}) =>
  callRoute(mediaRoutes["media.list"], (req) => listMedia(deps(), req), {
    principal,
    params: {},
    query,
    body: null,
  });
const content = (id: string, principal = operator) =>
  callRoute(mediaRoutes["media.content"], (req) => mediaContent(deps(), req), {
    principal,
    params: { id },
    query: {},
    body: null,
  });
const remove = (id: string, principal = operator) =>
  callRoute(mediaRoutes["media.delete"], (req) => deleteMedia(deps(), req), {
    principal,
    params: { id },
    query: {},
    body: null,
  });

describe("media", () => {
  it("records an upload in the session's workspace (201, with its content's location) and its event", async () => {
    const answer = await upload(shopAdmin);
    expect(answer).toMatchObject({
      status: 201,
      body: { workspaceKey: "shop", fileName: "logo.png", uploadedBy: "shop-admin" },
    });
    expect(answer.headers?.location).toBe(`/api/media/${answer.body?.id}/content`);
    expect(records.events).toEqual([`media.uploaded ${answer.body?.id}`]);
  });

  it("deletes the stored bytes of an upload to a workspace that does not exist", async () => {
    await expect(upload(operator, "ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(store.objects.size).toBe(0);
    expect(records.records.size).toBe(0);
    // Another workspace named by a workspace session is refused by the contract before the handler runs
    // (the gateway removes the bytes of any refused upload).
    await expect(upload(shopAdmin, "news")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(records.records.size).toBe(0);
  });

  it("lists newest first in pages, leaving out files whose bytes are lost unless the store cannot be asked", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await upload()).body?.id as string);
    await upload(shopAdmin);
    store.objects.delete(ids[1] as string);
    const first = (await list(operator, { limit: 2 })).body;
    // The second newest is lost: the first page shows one file, and its cursor still pages past it.
    expect(first?.items.map((m) => m.id)).toEqual([ids[2]]);
    expect(
      (await list(operator, { limit: 2, cursor: first?.nextCursor as string })).body?.items.map((m) => m.id),
    ).toEqual([ids[0]]);
    store.unreachable = true;
    expect((await list()).body?.items).toHaveLength(3);
  });

  it("serves a file's content only within reach, and a 404 saying so when its bytes are lost", async () => {
    const shopFile = (await upload(shopAdmin)).body?.id as string;
    const defaultFile = (await upload()).body?.id as string;
    expect((await content(shopFile, shopAdmin)).body).toMatchObject({
      objectName: shopFile,
      contentType: "image/png",
    });
    await expect(content(defaultFile, shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    store.objects.delete(shopFile);
    await expect(content(shopFile, shopAdmin)).rejects.toThrow(/no longer stored/);
  });

  it("deletes the record with its event, then the bytes; another workspace's file is a 404", async () => {
    const shopFile = (await upload(shopAdmin)).body?.id as string;
    const defaultFile = (await upload()).body?.id as string;
    await expect(remove(defaultFile, shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(store.objects.has(defaultFile)).toBe(true);
    expect((await remove(shopFile, shopAdmin)).status).toBe(204);
    expect(records.records.has(shopFile)).toBe(false);
    expect(store.objects.has(shopFile)).toBe(false);
    expect(records.events.at(-1)).toBe(`media.deleted ${shopFile}`);
  });
});
