/**
 * What the public routes read from the resolver (a visible workspace with its route, a surface's
 * navigation, a render's navigation and snippets), through their message contracts with the tables in
 * memory: no NATS, no PostgreSQL. Any NATS client may send these: a malformed key or host reaches no
 * table, an invisible workspace shows nothing, and navigation is built from the stored tree as the
 * surface's visitors see it (hidden items left out, ordered, each with its full path).
 */
import { callMessage, type NavItem, resolverMessages, type SurfaceData } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import { navigation, type PublicRepository, publicWorkspace, surfaceData } from "./public.js";
import type { VisibleWorkspaceRow } from "./repository.js";

interface Workspace {
  readonly key: string;
  readonly tenantKey: string;
  readonly visible: boolean;
  readonly bindings: ReadonlyArray<readonly [host: string, prefix: string]>;
}

/** The tables' answers as the SQL gives them; `asked` records every question that reached them. */
class MemoryPublic implements PublicRepository {
  readonly asked: string[] = [];
  constructor(
    private readonly workspaces: readonly Workspace[],
    private readonly surfaces: Readonly<Record<string, NavItem>>,
    private readonly snippetsOf: Readonly<Record<string, SurfaceData["snippets"]>> = {},
  ) {}

  async byKey(workspaceKey: string, defaultTenantKey: string | null) {
    this.asked.push(`key ${workspaceKey}`);
    const w = this.visible(defaultTenantKey).find((x) => x.key === workspaceKey);
    if (w === undefined) return null;
    const first = [...w.bindings].sort((a, b) => a[1].length - b[1].length || a[0].localeCompare(b[0]))[0];
    return this.row(w, first);
  }

  async byHost(host: string, path: string, defaultTenantKey: string | null) {
    this.asked.push(`host ${host} ${path}`);
    const covers = (prefix: string) => prefix === "/" || path === prefix || path.startsWith(`${prefix}/`);
    const found = this.visible(defaultTenantKey)
      .flatMap((w) => w.bindings.filter(([h, p]) => h === host && covers(p)).map((b) => [w, b] as const))
      .sort((a, b) => b[1][1].length - a[1][1].length)[0];
    return found === undefined ? null : this.row(found[0], found[1]);
  }

  async surfaceRoot(workspaceKey: string, surfaceKey: string) {
    return this.surfaces[`${workspaceKey}/${surfaceKey}`] ?? null;
  }

  async snippets(workspaceKey: string) {
    return this.snippetsOf[workspaceKey] ?? {};
  }

  private visible(defaultTenantKey: string | null) {
    return this.workspaces.filter(
      (w) => w.visible && (defaultTenantKey === null || w.tenantKey === defaultTenantKey),
    );
  }

  private row(w: Workspace, binding: readonly [string, string] | undefined): VisibleWorkspaceRow {
    return {
      key: w.key,
      name: `The ${w.key} workspace`,
      type: "site",
      access_policy: "Public",
      tenant_key: w.tenantKey,
      public_base_url: null,
      host: binding?.[0] ?? null,
      path_prefix: binding?.[1] ?? null,
    };
  }
}

const tree: NavItem = {
  key: "root",
  title: "Home",
  path: "app",
  children: [
    // Contact before Blog: at the same order, the title decides.
    { key: "c", title: "Contact", path: "", order: 2 },
    {
      key: "b",
      title: "Blog",
      path: "blog",
      order: 2,
      children: [{ key: "post", title: "Post", path: "p" }],
    },
    {
      key: "a",
      title: "About",
      path: "about",
      order: 1,
      children: [{ key: "x", title: "X", path: "x", visible: false }],
    },
    { key: "hidden", title: "Drafts", path: "drafts", visible: false },
  ],
};

function tables() {
  return new MemoryPublic(
    [
      {
        key: "shop",
        tenantKey: "acme",
        visible: true,
        bindings: [
          ["shop.example.com", "/"],
          ["shop.example.com", "/eu"],
        ],
      },
      { key: "shop-de", tenantKey: "acme", visible: true, bindings: [["shop.example.com", "/eu/de"]] },
      { key: "closed", tenantKey: "acme", visible: false, bindings: [["shop.example.com", "/closed"]] },
      { key: "zeta", tenantKey: "zeta", visible: true, bindings: [] },
    ],
    { "shop/default": tree, "shop-de/default": tree },
    { shop: { footer: { content: "<p>hi</p>", contentType: "text/html" } } },
  );
}

const ask = {
  workspace: (t: PublicRepository, request: unknown, tenant: string | null = null) =>
    callMessage(resolverMessages["workspace.public"], (r) => publicWorkspace(t, tenant, r), request as never),
  navigation: (t: PublicRepository, request: unknown, tenant: string | null = null) =>
    callMessage(resolverMessages["navigation.get"], (r) => navigation(t, tenant, r), request as never),
  surface: (t: PublicRepository, request: unknown, tenant: string | null = null) =>
    callMessage(resolverMessages["surface.data"], (r) => surfaceData(t, tenant, r), request as never),
};

describe("a public workspace", () => {
  it("is found by key with its first binding, and by host with the longest prefix covering the path", async () => {
    const t = tables();
    expect(await ask.workspace(t, { workspaceKey: "shop" })).toEqual({
      workspace: { key: "shop", name: "The shop workspace", type: "site" },
      accessPolicy: "Public",
      tenantKey: "acme",
      route: { publicBaseUrl: null, publicHost: "shop.example.com", publicPathPrefix: "/" },
    });
    // A workspace without a binding: an empty host and the root prefix.
    expect((await ask.workspace(t, { workspaceKey: "zeta" }))?.route).toMatchObject({
      publicHost: "",
      publicPathPrefix: "/",
    });
    expect((await ask.workspace(t, { host: "shop.example.com", path: "/eu/de/shoes" }))?.workspace.key).toBe(
      "shop-de",
    );
    expect(
      (await ask.workspace(t, { host: "shop.example.com", path: "/eu/den" }))?.route.publicPathPrefix,
    ).toBe("/eu");
    // The host and path are normalised before they are looked up: case, a port, a trailing dot, dot segments.
    expect(
      (await ask.workspace(t, { host: "SHOP.Example.com.:443", path: "/eu/./de/../de" }))?.workspace.key,
    ).toBe("shop-de");
    expect(t.asked.at(-1)).toBe("host shop.example.com /eu/de");
  });

  it("is nothing when invisible, of another tenant than the default, or asked for by a malformed key or host", async () => {
    const t = tables();
    // An invisible workspace leaves its prefix to the one bound above it.
    expect((await ask.workspace(t, { host: "shop.example.com", path: "/closed/x" }))?.workspace.key).toBe(
      "shop",
    );
    expect(await ask.workspace(t, { workspaceKey: "closed" })).toBeNull();
    expect(await ask.workspace(t, { workspaceKey: "zeta" }, "acme")).toBeNull();
    expect((await ask.workspace(t, { workspaceKey: "shop" }, "acme"))?.tenantKey).toBe("acme");
    const asked = t.asked.length;
    expect(await ask.workspace(t, { workspaceKey: "Not A Key!" })).toBeNull();
    expect(await ask.workspace(t, { host: "bad host/", path: "/" })).toBeNull();
    expect(t.asked).toHaveLength(asked);
    // What the contract refuses does not reach the handler at all.
    await expect(ask.workspace(t, { workspaceKey: "x".repeat(64) })).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
    });
    await expect(ask.workspace(t, { host: "shop.example.com" })).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
    });
    expect(t.asked).toHaveLength(asked);
  });
});

describe("navigation", () => {
  it("lists the root's visible children by order then title, each with its full path under the workspace's prefix", async () => {
    const view = await ask.navigation(tables(), { workspaceKey: "shop", surfaceKey: "default" });
    expect(view?.items).toEqual([
      { key: "a", title: "About", path: "about", fullPath: "/app/about", order: 1, hasChildren: false },
      { key: "b", title: "Blog", path: "blog", fullPath: "/app/blog", order: 2, hasChildren: true },
      { key: "c", title: "Contact", path: "", fullPath: "/app", order: 2, hasChildren: false },
    ]);
    // Under the prefix the workspace was reached by.
    const eu = await ask.navigation(tables(), {
      workspaceKey: "shop",
      surfaceKey: "default",
      pathPrefix: "/eu",
    });
    expect(eu?.items.map((i) => i.fullPath)).toEqual(["/eu/app/about", "/eu/app/blog", "/eu/app"]);
    // Its own first binding's prefix when none is given.
    const de = await ask.navigation(tables(), { workspaceKey: "shop-de", surfaceKey: "default" });
    expect(de?.items[0]?.fullPath).toBe("/eu/de/app/about");
  });

  it("goes down to a parent item's children, and is nothing for an unknown parent, surface or invisible workspace", async () => {
    const blog = await ask.navigation(tables(), {
      workspaceKey: "shop",
      surfaceKey: "default",
      parentKey: "b",
    });
    expect(blog?.items).toEqual([
      { key: "post", title: "Post", path: "p", fullPath: "/app/blog/p", order: 0, hasChildren: false },
    ]);
    expect(
      await ask.navigation(tables(), { workspaceKey: "shop", surfaceKey: "default", parentKey: "nope" }),
    ).toBeNull();
    expect(await ask.navigation(tables(), { workspaceKey: "shop", surfaceKey: "admin" })).toBeNull();
    expect(await ask.navigation(tables(), { workspaceKey: "closed", surfaceKey: "default" })).toBeNull();
    expect(
      await ask.navigation(tables(), { workspaceKey: "shop-de", surfaceKey: "default" }, "zeta"),
    ).toBeNull();
  });
});

describe("a render's surface data", () => {
  it("is the default surface's navigation under the given prefix and the workspace's snippets", async () => {
    const data = await ask.surface(tables(), { workspaceKey: "shop", pathPrefix: "/eu" });
    expect(data.navigation.map((i) => i.fullPath)).toEqual(["/eu/app/about", "/eu/app/blog", "/eu/app"]);
    expect(data.snippets).toEqual({ footer: { content: "<p>hi</p>", contentType: "text/html" } });
    // An invisible workspace renders no navigation.
    expect((await ask.surface(tables(), { workspaceKey: "closed", pathPrefix: "/" })).navigation).toEqual([]);
  });
});
