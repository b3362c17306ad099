/**
 * Workspaces through their contracts, with the workspaces, their bindings and the hosts' assignments in
 * memory: no NATS, no PostgreSQL. Only a platform session creates a workspace or turns one on or off; a
 * workspace never moves to another tenant; a host+prefix pair has one workspace, and a workspace session
 * is never told which; hosts are claimed by the tenant's rules; each change records its event.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, type PlatformEventData, refusalOf, resolverRoutes } from "@svc/contracts";
import { ErrorCode, type SvcError } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import { MemoryHosts } from "./memory-hosts.js";
import {
  deleteWorkspace,
  getWorkspace,
  listWorkspaces,
  putWorkspace,
  type Workspace,
  type WorkspaceBinding,
  type WorkspaceChange,
  type WorkspaceFields,
  type WorkspaceTables,
} from "./workspaces.js";

class MemoryWorkspaces implements WorkspaceTables {
  readonly stored = new Map<string, Workspace>();
  readonly events: string[] = [];
  readonly hosts = new MemoryHosts();

  async page(filter: { only: string | null; tenantKey: string | null; after: string | null; limit: number }) {
    return [...this.stored.values()]
      .filter(
        (w) =>
          (filter.only === null || w.key === filter.only) &&
          (filter.tenantKey === null || w.tenantKey === filter.tenantKey) &&
          (filter.after === null || w.key > filter.after),
      )
      .sort((a, b) => (a.key < b.key ? -1 : 1))
      .slice(0, filter.limit + 1);
  }
  async find(key: string) {
    return this.stored.get(key) ?? null;
  }
  async change<T>(key: string, change: (tables: WorkspaceChange) => Promise<T>): Promise<T> {
    const before = new Map(this.stored);
    const assignedBefore = new Map(this.hosts.assigned);
    const bindingsBefore = new Map(this.hosts.bindings);
    const events: string[] = [];
    const { stored, hosts } = this;
    try {
      const result = await change({
        async existing() {
          const w = stored.get(key);
          return w === undefined ? null : { tenantKey: w.tenantKey, isActive: w.isActive };
        },
        async taken(bindings: readonly WorkspaceBinding[]) {
          return [...stored.values()]
            .filter((w) => w.key !== key)
            .flatMap((w) =>
              w.bindings
                .filter((b) => bindings.some((x) => x.host === b.host && x.pathPrefix === b.pathPrefix))
                .map((b) => ({ ...b, workspaceKey: w.key })),
            );
        },
        async shadowed(bindings: readonly WorkspaceBinding[]) {
          const mine = stored.get(key)?.bindings ?? [];
          const fresh = bindings.filter(
            (n) => !mine.some((m) => m.host === n.host && m.pathPrefix === n.pathPrefix),
          );
          return [...stored.values()]
            .filter((w) => w.key !== key)
            .flatMap((w) =>
              w.bindings
                .filter((b) =>
                  fresh.some(
                    (n) =>
                      n.host === b.host &&
                      n.pathPrefix !== b.pathPrefix &&
                      (b.pathPrefix === "/" || n.pathPrefix.startsWith(`${b.pathPrefix}/`)),
                  ),
                )
                .map((b) => ({ ...b, workspaceKey: w.key })),
            );
        },
        async save(f: WorkspaceFields) {
          if (!hosts.tenants.has(f.tenantKey)) return false;
          const old = stored.get(key);
          stored.set(key, {
            key,
            tenantKey: f.tenantKey,
            name: f.name,
            type: f.type,
            isActive: f.isActive ?? old?.isActive ?? true,
            accessPolicy: f.accessPolicy,
            publicBaseUrl: f.publicBaseUrl,
            createdAt: old?.createdAt ?? new Date(0),
            updatedAt: new Date(1),
            bindings: old?.bindings ?? [],
          });
          return true;
        },
        hosts: async () => hosts,
        async bind(bindings: readonly WorkspaceBinding[]) {
          const w = stored.get(key) as Workspace;
          // As the tables read them back: by host, then path prefix.
          const ordered = [...bindings].sort((a, b) =>
            a.host === b.host ? (a.pathPrefix < b.pathPrefix ? -1 : 1) : a.host < b.host ? -1 : 1,
          );
          stored.set(key, { ...w, bindings: ordered });
          hosts.bindings.set(key, { tenantKey: w.tenantKey, hosts: bindings.map((b) => b.host) });
        },
        read: async () => stored.get(key) as Workspace,
        async remove() {
          const gone = stored.get(key);
          stored.delete(key);
          hosts.bindings.delete(key);
          return gone === undefined ? null : { tenantKey: gone.tenantKey, media: [] };
        },
        async record<N extends "workspace.created" | "workspace.updated" | "workspace.deleted">(
          eventName: N,
          data: PlatformEventData[N],
        ) {
          events.push(`${eventName} ${JSON.stringify(data)}`);
        },
      });
      this.events.push(...events);
      return result;
    } catch (error) {
      // A transaction: nothing of a refused change stays, hosts claimed in it neither.
      this.stored.clear();
      for (const [k, v] of before) this.stored.set(k, v);
      this.hosts.assigned.clear();
      for (const [k, v] of assignedBefore) this.hosts.assigned.set(k, v);
      this.hosts.bindings.clear();
      for (const [k, v] of bindingsBefore) this.hosts.bindings.set(k, v);
      throw error;
    }
  }
}

// tenant.update: the operator's bindings may take a host no tenant has (the hosts routes' right).
const operator = caller(["workspace.read", "workspace.update", "workspace.delete", "tenant.update"]);
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let tables: MemoryWorkspaces;
const deps = () => ({ workspaces: tables, mediaBytes: { delete: async () => undefined } });
beforeEach(() => {
  tables = new MemoryWorkspaces();
});

type Body = {
  tenantKey: string;
  name: string;
  isActive?: boolean;
  bindings?: Array<{ host: string; pathPrefix?: string }>;
};
const put = (key: string, body: Body, principal = operator) =>
  callRoute(resolverRoutes["workspaces.put"], (req) => putWorkspace(deps(), req), {
    principal,
    params: { workspaceKey: key },
    query: {},
    body,
  });
const list = (principal: Principal, query: Record<string, string | number> = {}) =>
  callRoute(resolverRoutes["workspaces.list"], (req) => listWorkspaces(deps(), req), {
    principal,
    params: {},
    query,
    body: null,
  });

describe("PUT /api/workspaces/:workspaceKey", () => {
  it("creates a workspace (201, active, with its location) and then replaces it (200), recording each event", async () => {
    expect(await put("shop", { tenantKey: "acme", name: "Shop" })).toMatchObject({
      status: 201,
      headers: { location: "/api/workspaces/shop" },
      body: { workspaceKey: "shop", tenantKey: "acme", isActive: true, accessPolicy: "Public", type: "base" },
    });
    await put("shop", { tenantKey: "acme", name: "Shop", isActive: false });
    // Left out, the flag stays as the operator set it.
    expect(await put("shop", { tenantKey: "acme", name: "The shop" })).toMatchObject({
      status: 200,
      body: { name: "The shop", isActive: false },
    });
    expect(tables.events.map((e) => e.split(" ")[0])).toEqual([
      "workspace.created",
      "workspace.updated",
      "workspace.updated",
    ]);
    expect(tables.events[2]).toContain('"name":"The shop"');
  });

  it("lets a workspace session change only its own existing workspace, and never its active flag", async () => {
    expect((await refusalOf(put("shop", { tenantKey: "acme", name: "Mine" }, shopAdmin))).code).toBe(
      ErrorCode.Forbidden,
    );
    await put("shop", { tenantKey: "acme", name: "Shop" });
    expect((await put("shop", { tenantKey: "acme", name: "Renamed" }, shopAdmin)).status).toBe(200);
    const flag = await refusalOf(
      put("shop", { tenantKey: "acme", name: "Renamed", isActive: false }, shopAdmin),
    );
    expect(flag.extensions).toMatchObject({ rule: "platform-only-field", field: "/body/isActive" });
    // Its own flag as it is: accepted.
    expect((await put("shop", { tenantKey: "acme", name: "Again", isActive: true }, shopAdmin)).status).toBe(
      200,
    );
    await put("news", { tenantKey: "zeta", name: "News" });
    await expect(put("news", { tenantKey: "zeta", name: "Taken" }, shopAdmin)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    expect(tables.stored.get("news")?.name).toBe("News");
  });

  it("never moves a workspace to another tenant (409), and refuses a tenant that does not exist (400)", async () => {
    await put("shop", { tenantKey: "acme", name: "Shop" });
    expect((await refusalOf(put("shop", { tenantKey: "zeta", name: "Shop" }))).code).toBe(ErrorCode.Conflict);
    const unknown = await refusalOf(put("new", { tenantKey: "ghost", name: "New" }));
    expect(unknown.code).toBe(ErrorCode.ValidationFailed);
    expect(tables.stored.has("new")).toBe(false);
    expect(tables.events).toHaveLength(1);
  });

  it("stores bindings as resolution reads them, and refuses what is not a host or a path prefix", async () => {
    const answer = await put("shop", {
      tenantKey: "acme",
      name: "Shop",
      bindings: [
        { host: "Shop.Example", pathPrefix: "/store/" },
        { host: "shop.example", pathPrefix: "/store" },
        { host: "a.example" },
      ],
    });
    expect(answer.body?.bindings).toEqual([
      { host: "a.example", pathPrefix: "/" },
      { host: "shop.example", pathPrefix: "/store" },
    ]);
    const bad = await refusalOf(
      put("shop", {
        tenantKey: "acme",
        name: "Shop",
        bindings: [{ host: "not a host" }, { host: "b.example", pathPrefix: "/a/../b" }],
      }),
    );
    expect(bad.code).toBe(ErrorCode.ValidationFailed);
    expect(
      (bad as SvcError & { violations?: Array<{ field: string }> }).violations?.map((v) => v.field),
    ).toEqual(["/body/bindings/0/host", "/body/bindings/1/pathPrefix"]);
  });

  it("lets no workspace session bind a prefix under another workspace's on its host; a platform session may", async () => {
    await put("main", {
      tenantKey: "acme",
      name: "Main",
      bindings: [{ host: "acme.example" }, { host: "docs.acme.example", pathPrefix: "/guide" }],
    });
    await put("blog", { tenantKey: "acme", name: "Blog", bindings: [{ host: "blog.acme.example" }] });
    const blogAdmin = { ...shopAdmin, workspaceKey: "blog" };
    const blogWith = (...extra: Array<{ host: string; pathPrefix?: string }>) =>
      put(
        "blog",
        { tenantKey: "acme", name: "Blog", bindings: [{ host: "blog.acme.example" }, ...extra] },
        blogAdmin,
      );
    // acme.example/login would take main's sign-in page (the longest prefix wins), and so would any path
    // under /guide on the docs host.
    for (const taking of [
      { host: "acme.example", pathPrefix: "/login" },
      { host: "docs.acme.example", pathPrefix: "/guide/v2" },
    ]) {
      const refused = await refusalOf(blogWith(taking));
      expect(refused.code).toBe(ErrorCode.Conflict);
      expect(refused.extensions).toMatchObject({ rule: "binding-under-another-workspace" });
      expect(refused.message).not.toContain("main");
    }
    // Beside main's prefix, not under it: the blog's own.
    expect((await blogWith({ host: "docs.acme.example", pathPrefix: "/blog" })).status).toBe(200);
    // Its own bindings sent again change nothing, and are not refused once a platform session split a host.
    expect(
      (
        await put("blog", {
          tenantKey: "acme",
          name: "Blog",
          bindings: [{ host: "acme.example", pathPrefix: "/news" }],
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await put(
          "blog",
          { tenantKey: "acme", name: "Blog 2", bindings: [{ host: "acme.example", pathPrefix: "/news" }] },
          blogAdmin,
        )
      ).status,
    ).toBe(200);
    expect(tables.stored.get("blog")?.bindings).toEqual([{ host: "acme.example", pathPrefix: "/news" }]);
  });

  it("gives a host+prefix pair to one workspace, naming the holder to a platform session only", async () => {
    await put("shop", {
      tenantKey: "acme",
      name: "Shop",
      bindings: [{ host: "acme.example", pathPrefix: "/shop" }],
    });
    await put("blog", { tenantKey: "acme", name: "Blog" });
    const forOperator = await refusalOf(
      put("blog", {
        tenantKey: "acme",
        name: "Blog",
        bindings: [{ host: "acme.example", pathPrefix: "/shop" }],
      }),
    );
    expect(forOperator.message).toBe("acme.example/shop is bound to workspace 'shop'.");
    const blogAdmin = { ...shopAdmin, workspaceKey: "blog" };
    const forTenant = await refusalOf(
      put(
        "blog",
        { tenantKey: "acme", name: "Blog", bindings: [{ host: "acme.example", pathPrefix: "/shop" }] },
        blogAdmin,
      ),
    );
    expect(forTenant.message).toBe("acme.example/shop is already bound.");
    expect(forTenant.extensions).toEqual({ bindings: [{ host: "acme.example", pathPrefix: "/shop" }] });
    expect(tables.stored.get("blog")?.bindings).toEqual([]);
  });

  it("claims hosts by the tenant's rules: an operator's binding takes a free host, a workspace session's does not", async () => {
    await put("shop", { tenantKey: "acme", name: "Shop", bindings: [{ host: "acme.example" }] });
    expect(tables.hosts.assigned.get("acme.example")).toBe("acme");
    await put("news", { tenantKey: "zeta", name: "News" });
    // Another tenant's host: refused, and nothing of the change stays.
    const foreign = await refusalOf(
      put("news", {
        tenantKey: "zeta",
        name: "Renamed",
        bindings: [{ host: "acme.example", pathPrefix: "/n" }],
      }),
    );
    expect(foreign.message).toBe("host 'acme.example' is not available to this tenant");
    expect(tables.stored.get("news")?.name).toBe("News");
    const newsAdmin = { ...shopAdmin, workspaceKey: "news" };
    const free = await refusalOf(
      put("news", { tenantKey: "zeta", name: "News", bindings: [{ host: "free.example" }] }, newsAdmin),
    );
    expect(free.code).toBe(ErrorCode.Conflict);
    expect(tables.hosts.assigned.has("free.example")).toBe(false);
  });

  it("lets a platform session without tenant.update bind its tenant's hosts but take no free one", async () => {
    await put("shop", { tenantKey: "acme", name: "Shop", bindings: [{ host: "acme.example" }] });
    const workspaceEditor = caller(["workspace.read", "workspace.update"]);
    const free = await refusalOf(
      put("shop", { tenantKey: "acme", name: "Shop", bindings: [{ host: "free.example" }] }, workspaceEditor),
    );
    expect(free.code).toBe(ErrorCode.Conflict);
    expect(free.message).toContain("a platform operator with tenant.update assigns hosts");
    expect(tables.hosts.assigned.has("free.example")).toBe(false);
    // A host the tenant has already: bound as before.
    await put(
      "shop",
      { tenantKey: "acme", name: "Shop", bindings: [{ host: "acme.example", pathPrefix: "/shop" }] },
      workspaceEditor,
    );
    expect(tables.stored.get("shop")?.bindings).toEqual([{ host: "acme.example", pathPrefix: "/shop" }]);
  });
});

describe("reading and deleting workspaces", () => {
  beforeEach(async () => {
    for (const [key, tenantKey] of [
      ["shop", "acme"],
      ["blog", "acme"],
      ["news", "zeta"],
    ] as const)
      await put(key, { tenantKey, name: key });
  });

  it("lists every workspace for a platform session, by tenant and in pages; a workspace session sees its own", async () => {
    expect((await list(operator)).body?.items.map((w) => w.workspaceKey)).toEqual(["blog", "news", "shop"]);
    expect((await list(operator, { tenantKey: "acme" })).body?.items.map((w) => w.workspaceKey)).toEqual([
      "blog",
      "shop",
    ]);
    const first = (await list(operator, { limit: 2 })).body;
    expect(first?.items.map((w) => w.workspaceKey)).toEqual(["blog", "news"]);
    const next = (await list(operator, { limit: 2, cursor: first?.nextCursor as string })).body;
    expect(next).toMatchObject({ items: [{ workspaceKey: "shop" }], nextCursor: null });
    expect((await list(shopAdmin)).body?.items.map((w) => w.workspaceKey)).toEqual(["shop"]);
    await expect(list(shopAdmin, { workspaceKey: "news" })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
  });

  it("deletes a workspace (204) with its event naming its tenant; a second delete is a 404", async () => {
    const remove = () =>
      callRoute(resolverRoutes["workspaces.delete"], (req) => deleteWorkspace(deps(), req), {
        principal: operator,
        params: { workspaceKey: "news" },
        query: {},
        body: null,
      });
    expect((await remove()).status).toBe(204);
    expect(tables.events.at(-1)).toBe('workspace.deleted {"workspaceKey":"news","tenantKey":"zeta"}');
    await expect(remove()).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(
      callRoute(resolverRoutes["workspaces.get"], (req) => getWorkspace(deps(), req), {
        principal: operator,
        params: { workspaceKey: "news" },
        query: {},
        body: null,
      }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});
