/**
 * Media. A multipart upload stored where every replica reads it, its type sniffed from
 * the bytes and its name sanitised; the content served with ETag, Content-Length, ranges,
 * Content-Disposition and nosniff; an upload over the limit refused with 413 and nothing stored; a
 * workspace session sees only its workspace's files; events for uploads and deletions.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import { Objm } from "@nats-io/obj";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { mediaBucket } from "@svc/media";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
let base: string;
let operator: string;
let nc: NatsConnection;
const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);
const events: string[] = [];
const env = { BackendHost__RateLimitApiPerMinute: "0", BackendHost__MaxMediaUploadBytes: "1000" };

/** The object store the media files' bytes are kept in, as a plain NATS client sees it. */
const mediaObjects = () => new Objm(nc).open(mediaBucket(h.env.SVC_SUBJECT_PREFIX as string));

/** The first bytes of a PNG file, then filler. */
const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]),
  Buffer.alloc(100, 7),
]);

async function upload(bytes: Buffer, fileName: string, token = operator, workspaceKey = "mw") {
  const form = new FormData();
  // The client claims HTML: the platform believes the bytes.
  form.append("file", new Blob([bytes], { type: "text/html" }), fileName);
  const response = await api("POST", `/api/media?workspaceKey=${workspaceKey}`, token, form);
  return { status: response.status, json: response.json<Record<string, unknown>>() };
}

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  await asOperator("POST", "/api/tenants", { tenantKey: "mt", name: "Media" });
  for (const key of ["mw", "other-mw"]) {
    await asOperator("PUT", `/api/workspaces/${key}`, { tenantKey: "mt", name: key });
  }
  nc = await connect(h.natsOptions());
  nc.subscribe(`${h.env.SVC_SUBJECT_PREFIX}.events.media.>`, {
    callback: (_e, m) => void events.push(m.subject.split(".events.")[1] as string),
  });
});
afterAll(async () => {
  await nc?.close();
  await h.stopAll();
});

describe("media", () => {
  it("stores an upload with its sniffed type and a safe name, and serves it with ranges", async () => {
    const up = await upload(PNG, "../../evil\u0007name.png");
    expect(up.status).toBe(201);
    expect(up.json).toMatchObject({
      workspaceKey: "mw",
      contentType: "image/png",
      fileName: "evil_name.png",
      size: PNG.length,
    });
    const id = up.json.id as string;
    const listed = (await asOperator("GET", "/api/media?workspaceKey=mw")).json<{
      items: Array<{ id: string }>;
    }>();
    expect(listed.items.map((m) => m.id)).toEqual([id]);

    const content = await asOperator("GET", `/api/media/${id}/content`);
    expect(content.status).toBe(200);
    expect(content.headers["content-type"]).toBe("image/png");
    expect(content.headers["content-length"]).toBe(String(PNG.length));
    expect(content.headers["x-content-type-options"]).toBe("nosniff");
    expect(content.headers["content-disposition"]).toContain('attachment; filename="evil_name.png"');
    expect(content.headers["accept-ranges"]).toBe("bytes");
    const etag = content.headers.etag as string;
    expect(etag).toMatch(/^"[0-9a-f]{64}"$/);
    expect(
      (
        await api("GET", `/api/media/${id}/content`, operator, undefined, {
          headers: { "if-none-match": etag },
        })
      ).status,
    ).toBe(304);
    expect(
      (
        await api("GET", `/api/media/${id}/content`, operator, undefined, {
          headers: { "if-none-match": `"stale", W/${etag}` },
        })
      ).status,
    ).toBe(304);

    const part = await api("GET", `/api/media/${id}/content`, operator, undefined, {
      headers: { range: "bytes=1-3" },
    });
    expect(part.status).toBe(206);
    expect(part.headers["content-range"]).toBe(`bytes 1-3/${PNG.length}`);
    expect(part.headers["content-length"]).toBe("3");
    expect(part.text).toBe("PNG");
    const beyond = await api("GET", `/api/media/${id}/content`, operator, undefined, {
      headers: { range: "bytes=5000-" },
    });
    expect(beyond.status).toBe(416);
    expect(beyond.headers["content-range"]).toBe(`bytes */${PNG.length}`);

    // Text is text, whatever the client says; other bytes are octet-stream.
    expect((await upload(Buffer.from("hello, world"), "notes.txt")).json).toMatchObject({
      contentType: "text/plain; charset=utf-8",
    });
    expect((await upload(Buffer.from([0, 1, 2, 3, 255]), "blob.bin")).json).toMatchObject({
      contentType: "application/octet-stream",
    });
  });

  it("refuses an upload over the limit with 413 and stores nothing", async () => {
    const before = (await asOperator("GET", "/api/media?workspaceKey=mw")).json<{ items: unknown[] }>().items
      .length;
    const tooBig = await upload(Buffer.alloc(2_000, 1), "big.bin");
    expect(tooBig.status).toBe(413);
    expect(tooBig.json).toMatchObject({ code: "SVC_PAYLOAD_TOO_LARGE" });
    expect(
      (await asOperator("GET", "/api/media?workspaceKey=mw")).json<{ items: unknown[] }>().items,
    ).toHaveLength(before);
  });

  it("keeps a workspace's files to its own sessions, and deletes them", async () => {
    const up = await upload(PNG, "logo.png");
    const id = up.json.id as string;
    const stranger = await mintToken({
      scope: "workspace",
      workspaceKey: "other-mw",
      permissions: ["media.read", "media.manage"],
    });
    expect((await api("GET", `/api/media/${id}/content`, stranger)).status).toBe(404);
    expect((await api("DELETE", `/api/media/${id}`, stranger)).status).toBe(404);
    expect((await api("GET", "/api/media", stranger)).json<{ items: unknown[] }>().items).toEqual([]);
    const member = await mintToken({
      scope: "workspace",
      workspaceKey: "mw",
      permissions: ["media.read", "media.manage"],
    });
    expect((await api("GET", `/api/media/${id}/content`, member)).status).toBe(200);
    expect((await api("DELETE", `/api/media/${id}`, member)).status).toBe(204);
    expect((await api("GET", `/api/media/${id}/content`, member)).status).toBe(404);
    const seen = await eventually(
      async () => [...events],
      (e) => e.includes("media.deleted"),
    );
    expect(seen).toContain("media.uploaded");
    expect(seen).toContain("media.deleted");
  });
});

describe("a deleted workspace's files", () => {
  /** Whether the object store still holds a file's bytes. */
  const stored = async (id: string) => {
    const info = await (await mediaObjects()).info(id);
    return info !== null && !info.deleted;
  };

  it("go with it: their records and their bytes, for a workspace and for a tenant's workspaces", async () => {
    await asOperator("POST", "/api/tenants", { tenantKey: "gone-t", name: "Going" });
    for (const key of ["gone-w", "gone-t-1", "gone-t-2"])
      await asOperator("PUT", `/api/workspaces/${key}`, {
        tenantKey: key === "gone-w" ? "mt" : "gone-t",
        name: key,
      });
    const ids: Record<string, string> = {};
    for (const key of ["gone-w", "gone-t-1", "gone-t-2", "mw"]) {
      const up = await upload(PNG, `${key}.png`, operator, key);
      expect(up.status, JSON.stringify(up.json)).toBe(201);
      ids[key] = up.json.id as string;
    }
    for (const id of Object.values(ids)) expect(await stored(id)).toBe(true);

    expect((await asOperator("DELETE", "/api/workspaces/gone-w")).status).toBe(204);
    expect((await asOperator("DELETE", "/api/tenants/gone-t?deleteWorkspaces=true")).status).toBe(204);
    // The bytes go once the deletion is committed (after the answer, so waited for).
    for (const key of ["gone-w", "gone-t-1", "gone-t-2"]) {
      const still = await eventually(
        () => stored(ids[key] as string),
        (s) => !s,
      );
      expect(still, key).toBe(false);
    }
    // Another workspace's file stays, and a workspace made again under a deleted key holds none.
    expect(await stored(ids.mw as string)).toBe(true);
    await asOperator("PUT", "/api/workspaces/gone-w", { tenantKey: "mt", name: "again" });
    const listed = await asOperator("GET", "/api/media?workspaceKey=gone-w");
    expect(listed.json<{ items: unknown[] }>().items).toEqual([]);
  });
});

/**
 * A regression: the upload was stored before its Idempotency-Key was checked, so a retry never replayed
 * (the fingerprint held a fresh object name: 422) and refused uploads left bytes no listing shows.
 */
describe("media uploads and Idempotency-Key", () => {
  const objects = async () => {
    let n = 0;
    for (const info of await (await mediaObjects()).list()) if (!info.deleted) n++;
    return n;
  };
  const uploadWith = async (bytes: Buffer, key: string, token = operator, workspaceKey = "mw") => {
    const form = new FormData();
    form.append("file", new Blob([bytes]), "retry.png");
    const response = await api("POST", `/api/media?workspaceKey=${workspaceKey}`, token, form, {
      headers: { "idempotency-key": key },
    });
    return {
      status: response.status,
      replayed: (response.headers["idempotency-replayed"] as string | undefined) ?? null,
      json: response.json<Record<string, unknown>>(),
    };
  };

  it("replays a retried upload without storing its bytes again", async () => {
    const before = await objects();
    const first = await uploadWith(PNG, "upload-once");
    expect(first.status, JSON.stringify(first.json)).toBe(201);
    const retry = await uploadWith(PNG, "upload-once");
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe("true");
    expect(retry.json.id).toBe(first.json.id);
    expect(await objects()).toBe(before + 1);
    // Another file under the same key is another request.
    const other = await uploadWith(Buffer.concat([PNG, Buffer.from("x")]), "upload-once");
    expect(other.status).toBe(422);
    expect(await objects()).toBe(before + 1);
  });

  it("leaves no bytes behind for a refused upload", async () => {
    const before = await objects();
    const refused = await uploadWith(PNG, "to-nowhere", operator, "no-such-workspace");
    expect(refused.status).toBe(404);
    const unauthorised = await uploadWith(PNG, "no-key-for-it", await mintToken({ scope: "platform" }));
    expect(unauthorised.status).toBe(403);
    expect(await objects()).toBe(before);
  });

  it("keeps keys per session scope and workspace", async () => {
    const sub = "00000000-0000-4000-8000-00000000abcd";
    const inMw = await mintToken({
      sub,
      scope: "workspace",
      workspaceKey: "mw",
      permissions: ["media.manage"],
    });
    const inOther = await mintToken({
      sub,
      scope: "workspace",
      workspaceKey: "other-mw",
      permissions: ["media.manage"],
    });
    const a = await uploadWith(PNG, "same-key", inMw, "mw");
    const b = await uploadWith(PNG, "same-key", inOther, "other-mw");
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.replayed).toBeNull();
    expect(b.json.workspaceKey).toBe("other-mw");
  });

  it("a file whose bytes the object store lost is a 404 saying so, and is not listed", async () => {
    const kept = await upload(PNG, "kept-then-lost.png");
    expect(kept.status).toBe(201);
    const id = kept.json.id as string;
    expect((await asOperator("GET", `/api/media/${id}/content`)).status).toBe(200);
    // NATS loses the media store (its stream is gone, as after a restart with an empty store).
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`OBJ_${mediaBucket(h.env.SVC_SUBJECT_PREFIX as string)}`);
    const lost = await asOperator("GET", `/api/media/${id}/content`);
    expect(lost.status).toBe(404);
    expect(lost.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(lost.json<{ detail: string }>().detail).toMatch(/no longer stored/);
    const listed = (await asOperator("GET", "/api/media?workspaceKey=mw")).json<{
      items: Array<{ id: string }>;
    }>();
    expect(listed.items.map((m) => m.id)).not.toContain(id);
    // The store is made again at the next upload, which is served.
    const again = await upload(PNG, "after-the-loss.png");
    expect(again.status).toBe(201);
    expect((await asOperator("GET", `/api/media/${again.json.id as string}/content`)).status).toBe(200);
  });
});
