/**
 * Surfaces and snippets through their contracts, with the tables in memory: no NATS, no PostgreSQL. The
 * workspace is the session's own for a workspace session and the named one (or `default`) for a platform
 * session, a 404 when it does not exist; a navigation tree has unique keys and at most 500 items; a PUT
 * creates (201) or replaces (200).
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, type NavItem, resolverRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  deleteSnippet,
  deleteSurface,
  getSurface,
  listSnippets,
  listSurfaces,
  putSnippet,
  putSurface,
  type Snippet,
  type Surface,
  type SurfaceTables,
} from "./surfaces.js";

class MemorySurfaces implements SurfaceTables {
  readonly workspaces = new Set(["default", "shop", "news"]);
  readonly surfacesByKey = new Map<string, Surface>();
  readonly snippetsByKey = new Map<string, Snippet>();

  async workspaceExists(workspaceKey: string) {
    return this.workspaces.has(workspaceKey);
  }
  async surfaces(workspaceKey: string) {
    return [...this.surfacesByKey.values()]
      .filter((s) => s.workspaceKey === workspaceKey)
      .sort((a, b) => (a.surfaceKey < b.surfaceKey ? -1 : 1));
  }
  async surface(workspaceKey: string, surfaceKey: string) {
    return this.surfacesByKey.get(`${workspaceKey}/${surfaceKey}`) ?? null;
  }
  async putSurface(s: Omit<Surface, "updatedAt">) {
    const id = `${s.workspaceKey}/${s.surfaceKey}`;
    const created = !this.surfacesByKey.has(id);
    const stored = { ...s, updatedAt: new Date(0) };
    this.surfacesByKey.set(id, stored);
    return { stored, created };
  }
  async removeSurface(workspaceKey: string, surfaceKey: string) {
    return this.surfacesByKey.delete(`${workspaceKey}/${surfaceKey}`);
  }
  async snippets(workspaceKey: string) {
    return [...this.snippetsByKey.values()]
      .filter((s) => s.workspaceKey === workspaceKey)
      .sort((a, b) => (a.snippetKey < b.snippetKey ? -1 : 1));
  }
  async putSnippet(s: Omit<Snippet, "updatedAt">) {
    const id = `${s.workspaceKey}/${s.snippetKey}`;
    const created = !this.snippetsByKey.has(id);
    const stored = { ...s, updatedAt: new Date(0) };
    this.snippetsByKey.set(id, stored);
    return { stored, created };
  }
  async removeSnippet(workspaceKey: string, snippetKey: string) {
    return this.snippetsByKey.delete(`${workspaceKey}/${snippetKey}`);
  }
}

const operator = caller(["workspace.read", "workspace.update", "snippet.read", "snippet.update"]);
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let tables: MemorySurfaces;
const deps = () => ({ surfaces: tables });
beforeEach(() => {
  tables = new MemorySurfaces();
});

const root = (children: NavItem[] = []): NavItem => ({ key: "root", title: "Home", path: "", children });
const put = (surfaceKey: string, applicationRoot: NavItem, principal = operator, workspaceKey?: string) =>
  callRoute(resolverRoutes["surfaces.put"], (req) => putSurface(deps(), req), {
    principal,
    params: { surfaceKey },
    query: workspaceKey === undefined ? {} : { workspaceKey },
    body: { name: surfaceKey, applicationRoot },
  });
const surfacesOf = (principal: Principal, workspaceKey?: string) =>
  callRoute(resolverRoutes["surfaces.list"], (req) => listSurfaces(deps(), req), {
    principal,
    params: {},
    query: workspaceKey === undefined ? {} : { workspaceKey },
    body: null,
  });

describe("surfaces", () => {
  it("puts a surface in the session's workspace: a workspace session's own, a platform session's named one or `default`", async () => {
    expect((await put("main", root(), shopAdmin)).status).toBe(201);
    expect((await put("main", root(), shopAdmin)).status).toBe(200);
    await put("main", root());
    await put("main", root(), operator, "news");
    await put("extra", root(), operator, " ");
    expect([...tables.surfacesByKey.keys()].sort()).toEqual([
      "default/extra",
      "default/main",
      "news/main",
      "shop/main",
    ]);
    expect((await surfacesOf(shopAdmin)).body?.items.map((s) => s.workspaceKey)).toEqual(["shop"]);
  });

  it("shows and deletes one surface of the session's workspace; another workspace's is a 404 and stays", async () => {
    await put("main", root([{ key: "a", title: "A", path: "a" }]), shopAdmin);
    await put("main", root(), operator, "news");
    const one = (principal: Principal, workspaceKey?: string) =>
      callRoute(resolverRoutes["surfaces.get"], (req) => getSurface(deps(), req), {
        principal,
        params: { surfaceKey: "main" },
        query: workspaceKey === undefined ? {} : { workspaceKey },
        body: null,
      });
    const remove = (principal: Principal, workspaceKey?: string) =>
      callRoute(resolverRoutes["surfaces.delete"], (req) => deleteSurface(deps(), req), {
        principal,
        params: { surfaceKey: "main" },
        query: workspaceKey === undefined ? {} : { workspaceKey },
        body: null,
      });
    expect((await one(shopAdmin)).body).toMatchObject({
      workspaceKey: "shop",
      surfaceKey: "main",
      applicationRoot: { children: [{ key: "a" }] },
    });
    await expect(one(shopAdmin, "news")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(remove(shopAdmin, "news")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(tables.surfacesByKey.has("news/main")).toBe(true);
    expect((await remove(shopAdmin)).status).toBe(204);
    await expect(remove(shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(one(shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect((await one(operator, "news")).body?.workspaceKey).toBe("news");
  });

  it("answers 404 for a workspace that does not exist or that a workspace session does not have", async () => {
    await expect(put("main", root(), operator, "ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(surfacesOf(shopAdmin, "news")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    tables.workspaces.delete("default");
    await expect(surfacesOf(operator)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(tables.surfacesByKey.size).toBe(0);
  });

  it("refuses a tree with a key used twice, naming where, or with more than 500 items", async () => {
    const twice = root([
      { key: "a", title: "A", path: "a", children: [{ key: "b", title: "B", path: "b" }] },
      { key: "b", title: "B again", path: "b2" },
    ]);
    await expect(put("main", twice)).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [{ field: "/body/applicationRoot/children/1/key", message: "'b' is used twice" }],
    });
    const wide = root(
      Array.from({ length: 100 }, (_, i) => ({
        key: `s${i}`,
        title: "S",
        path: `s${i}`,
        children: Array.from({ length: 5 }, (_, j) => ({ key: `s${i}-${j}`, title: "T", path: `t${j}` })),
      })),
    );
    await expect(put("main", wide)).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [{ field: "/body/applicationRoot", message: "has more than 500 items" }],
    });
    expect(tables.surfacesByKey.size).toBe(0);
  });
});

describe("snippets", () => {
  const putOne = (snippetKey: string, content: string, contentType?: "text/plain" | "text/html") =>
    callRoute(resolverRoutes["snippets.put"], (req) => putSnippet(deps(), req), {
      principal: shopAdmin,
      params: { snippetKey },
      query: {},
      body: contentType === undefined ? { content } : { content, contentType },
    });
  const remove = (snippetKey: string) =>
    callRoute(resolverRoutes["snippets.delete"], (req) => deleteSnippet(deps(), req), {
      principal: shopAdmin,
      params: { snippetKey },
      query: {},
      body: null,
    });

  it("puts plain text by default, replaces it, lists and deletes it; a second delete is a 404", async () => {
    expect(await putOne("footer", "Hello")).toMatchObject({
      status: 201,
      body: { workspaceKey: "shop", snippetKey: "footer", contentType: "text/plain" },
    });
    expect(await putOne("footer", "<b>Hi</b>", "text/html")).toMatchObject({
      status: 200,
      body: { content: "<b>Hi</b>", contentType: "text/html" },
    });
    const list = await callRoute(resolverRoutes["snippets.list"], (req) => listSnippets(deps(), req), {
      principal: shopAdmin,
      params: {},
      query: {},
      body: null,
    });
    expect(list.body?.items.map((s) => s.snippetKey)).toEqual(["footer"]);
    expect((await remove("footer")).status).toBe(204);
    await expect(remove("footer")).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});
