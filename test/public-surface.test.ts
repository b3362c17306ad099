/**
 * Tenants, workspaces, surfaces and snippets as an API, and the public routes
 * context, bootstrap.js, ui-chain, theme and navigation, through two gateway replicas on real NATS and
 * PostgreSQL.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runInNewContext } from "node:vm";

import { connect, type NatsConnection } from "@nats-io/transport-node";
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { examplePackage } from "../scripts/lib/example-plugin.js";
import { pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http, type HttpResponse, installPackage } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-public-"));
let gateways: string[] = [];
let operator: string;
let nc: NatsConnection;
const events: Array<{ subject: string; workspaceKey: string | undefined; data: Record<string, unknown> }> =
  [];

const env = pluginStackEnv(work, { dev: true });

const api = bearerApi(() => gateways[0] as string);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

const pub = (path: string, headers: Record<string, string> = {}, base = gateways[0]) =>
  http(`${base}${path}`, { headers });

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(pluginRegistryService, env);
  gateways = [
    (await h.start(gatewayService, env)).hooks.httpAddress as string,
    (await h.start(gatewayService, env)).hooks.httpAddress as string,
  ];
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  nc = await connect(h.natsOptions());
  nc.subscribe(`${h.env.SVC_SUBJECT_PREFIX}.events.workspace.>`, {
    callback: (_err, msg) =>
      void events.push({
        subject: msg.subject,
        workspaceKey: msg.headers?.get("Svc-Workspace-Key") || undefined,
        data: msg.json<Record<string, unknown>>(),
      }),
  });
});

afterAll(async () => {
  await nc?.close();
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

describe("tenants and workspaces", () => {
  it("creates, lists, updates and refuses conflicting bindings, publishing workspace events", async () => {
    const created = await asOperator("POST", "/api/tenants", { tenantKey: "acme", name: "Acme" });
    expect(created.status, created.text).toBe(201);
    expect(created.json()).toMatchObject({
      tenantKey: "acme",
      state: "active",
      isActive: true,
      workspaceCount: 0,
    });
    expect((await asOperator("POST", "/api/tenants", { tenantKey: "acme", name: "Again" })).status).toBe(409);
    const listed = await asOperator("GET", "/api/tenants?limit=100");
    expect(listed.json<{ items: Array<{ tenantKey: string }> }>().items.map((t) => t.tenantKey)).toContain(
      "acme",
    );

    const ws = await asOperator("PUT", "/api/workspaces/shop", {
      tenantKey: "acme",
      name: "Shop </script><script>alert(1)</script>",
      type: "store",
      bindings: [
        { host: "Shop.Example.COM", pathPrefix: "/" },
        { host: "acme.example", pathPrefix: "/shop/" },
      ],
    });
    expect(ws.status, ws.text).toBe(201);
    expect(ws.headers.location).toBe("/api/workspaces/shop");
    expect(ws.json()).toMatchObject({
      workspaceKey: "shop",
      tenantKey: "acme",
      accessPolicy: "Public",
      isActive: true,
      bindings: [
        { host: "acme.example", pathPrefix: "/shop" },
        { host: "shop.example.com", pathPrefix: "/" },
      ],
    });
    const other = await asOperator("PUT", "/api/workspaces/blog", {
      tenantKey: "acme",
      name: "Blog",
      bindings: [{ host: "acme.example", pathPrefix: "/" }],
    });
    expect(other.status).toBe(201);
    // A host+prefix pair belongs to one workspace.
    const clash = await asOperator("PUT", "/api/workspaces/blog", {
      tenantKey: "acme",
      name: "Blog",
      bindings: [{ host: "acme.example", pathPrefix: "/shop" }],
    });
    expect(clash.status).toBe(409);
    expect(clash.json()).toMatchObject({
      bindings: [{ host: "acme.example", pathPrefix: "/shop", workspaceKey: "shop" }],
    });
    const bad = await asOperator("PUT", "/api/workspaces/blog", {
      tenantKey: "nobody",
      name: "Blog",
      bindings: [
        { host: "not a host!", pathPrefix: "/x" },
        { host: "ok.example", pathPrefix: "/../up" },
      ],
    });
    expect(bad.status).toBe(400);
    expect(bad.json<{ errors: Array<{ field: string }> }>().errors.map((e) => e.field)).toEqual([
      "/body/bindings/0/host",
      "/body/bindings/1/pathPrefix",
    ]);
    expect(
      (await asOperator("PUT", "/api/workspaces/fresh", { tenantKey: "nobody", name: "Fresh" })).json<{
        errors: unknown[];
      }>(),
    ).toMatchObject({ errors: [{ field: "/body/tenantKey" }] });
    const updated = await asOperator("PUT", "/api/workspaces/blog", {
      tenantKey: "acme",
      name: "The blog",
      bindings: [{ host: "acme.example", pathPrefix: "/" }],
    });
    expect(updated.status).toBe(200);

    // A workspace session sees only its own, and cannot create one.
    const member = await mintToken({
      scope: "workspace",
      workspaceKey: "shop",
      permissions: ["workspace.read", "workspace.update"],
    });
    const own = await api("GET", "/api/workspaces", member);
    expect(own.json<{ items: Array<{ workspaceKey: string }> }>().items.map((w) => w.workspaceKey)).toEqual([
      "shop",
    ]);
    expect((await api("GET", "/api/workspaces/blog", member)).status).toBe(404);
    expect(
      (await api("PUT", "/api/workspaces/newone", member, { tenantKey: "acme", name: "N" })).status,
    ).toBe(404);

    const seen = await eventually(
      async () => events.map((e) => `${e.subject.split(".events.")[1]} ${e.workspaceKey}`),
      (names) => names.includes("workspace.updated blog"),
    );
    expect(seen).toEqual(
      expect.arrayContaining(["workspace.created shop", "workspace.created blog", "workspace.updated blog"]),
    );
  });
});

describe("public routes", () => {
  it("context: host from X-Forwarded-Host, path from X-Forwarded-Uri first, longest prefix wins", async () => {
    const ctx = await pub("/workspace/public/context?path=/", {
      host: "acme.example",
      "x-forwarded-uri": "/shop/cart",
    });
    expect(ctx.status, ctx.text).toBe(200);
    expect(ctx.json()).toEqual({
      workspace: { key: "shop", name: "Shop </script><script>alert(1)</script>", type: "store" },
      route: {
        publicBaseUrl: "http://acme.example/shop",
        publicHost: "acme.example",
        publicPathPrefix: "/shop",
      },
    });
    const forwarded = await pub("/workspace/public/context?path=/about", {
      host: "internal:8080",
      "x-forwarded-host": "acme.example",
    });
    expect(forwarded.json()).toMatchObject({ workspace: { key: "blog" }, route: { publicPathPrefix: "/" } });
    const none = await pub("/workspace/public/context", { host: "nothing.example" });
    expect(none.status).toBe(404);
  });

  it("context: answered for the origin it was reached by, and anew once the workspace changes", async () => {
    type Context = { workspace: { name: string }; route: { publicBaseUrl: string } };
    const ctx = async (headers: Record<string, string> = {}) =>
      (await pub("/workspace/public/context", { host: "acme.example", ...headers })).json<Context>();
    expect((await ctx()).route.publicBaseUrl).toBe("http://acme.example");
    expect((await ctx({ "x-forwarded-proto": "https" })).route.publicBaseUrl).toBe("https://acme.example");
    const port = await ctx({ "x-forwarded-host": "acme.example:8443", "x-forwarded-proto": "https" });
    expect(port.route.publicBaseUrl).toBe("https://acme.example:8443");
    // The first origin's answer is still its own.
    expect((await ctx()).route.publicBaseUrl).toBe("http://acme.example");
    for (const name of ["The blog, renamed", "The blog"]) {
      const put = await asOperator("PUT", "/api/workspaces/blog", {
        tenantKey: "acme",
        name,
        bindings: [{ host: "acme.example", pathPrefix: "/" }],
      });
      expect(put.status, put.text).toBe(200);
      for (const headers of [{}, { "x-forwarded-proto": "https" }] as Array<Record<string, string>>) {
        const seen = await eventually(
          () => ctx(headers),
          (c) => c.workspace.name === name,
        );
        expect(seen.workspace.name).toBe(name);
      }
    }
  });

  it("bootstrap.js: path from the query, else the Referer, escaped, with a default payload", async () => {
    // The script runs as a browser would run it, in a context of its own.
    const read = (r: HttpResponse) => {
      const window: { __SVC_WORKSPACE_CONTEXT__?: unknown } = {};
      runInNewContext(r.text, { window });
      return window.__SVC_WORKSPACE_CONTEXT__;
    };
    const byReferer = await pub("/workspace/public/bootstrap.js", {
      host: "acme.example",
      referer: "https://acme.example/shop/products?x=1",
    });
    expect(byReferer.status).toBe(200);
    expect(byReferer.headers["content-type"]).toBe("application/javascript; charset=utf-8");
    expect(byReferer.headers["cache-control"]).toBe("no-store, no-cache, must-revalidate");
    // The workspace's name cannot close the script element.
    expect(byReferer.text).not.toContain("</script>");
    expect(read(byReferer)).toEqual({
      workspace: { key: "shop", name: "Shop </script><script>alert(1)</script>", type: "store" },
      route: { publicBaseUrl: "http://acme.example/shop", publicPathPrefix: "/shop" },
    });
    const byQuery = await pub("/workspace/public/bootstrap.js?path=/news", {
      host: "acme.example",
      referer: "https://acme.example/shop/products",
    });
    expect(read(byQuery)).toMatchObject({ workspace: { key: "blog" } });
    const fallback = await pub("/workspace/public/bootstrap.js?path=/somewhere", { host: "nothing.example" });
    expect(read(fallback)).toEqual({
      workspace: { key: "default", name: "Workspace", type: "base" },
      route: { publicBaseUrl: "http://nothing.example/surface-app/", publicPathPrefix: "/somewhere" },
    });
  });

  it("ui-chain and theme: the chain of active, entitled plugins; identical 404s that enumerate nothing", async () => {
    const installed = await installPackage(gateways[0] as string, operator, await examplePackage());
    expect(installed.status).toBe(201);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "hello", entitled: true }],
    });
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    expect((await asOperator("PUT", "/api/workspaces/shop/plugins", { chain: ["hello"] })).status).toBe(200);
    expect((await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "hello" })).status).toBe(
      200,
    );

    const chain = await eventually(
      () => pub("/workspace/public/ui-chain?workspaceKey=shop"),
      (r) => r.status === 200 && r.json<{ chain: string[] }>().chain.length === 1,
    );
    expect(chain.json()).toEqual({ workspaceKey: "shop", chain: ["hello"] });
    expect((await pub("/workspace/public/ui-chain?workspaceKey=blog")).json()).toEqual({
      workspaceKey: "blog",
      chain: [],
    });
    const theme = await pub("/workspace/public/theme?workspaceKey=shop");
    expect(theme.json()).toMatchObject({
      workspaceKey: "shop",
      themePluginId: "hello",
      valuesByKey: { layout: "wide" },
    });
    expect((await pub("/workspace/public/theme?workspaceKey=nobody")).json()).toEqual({
      workspaceKey: "nobody",
      themePluginId: null,
      themeVersion: null,
      valuesByKey: {},
      sectionLayouts: [],
    });

    // Authenticated: anonymous callers get exactly the 404 of a workspace that does not exist.
    await asOperator("PUT", "/api/workspaces/shop", {
      tenantKey: "acme",
      name: "Shop",
      type: "store",
      accessPolicy: "Authenticated",
    });
    const hiddenOne = await eventually(
      () => pub("/workspace/public/ui-chain?workspaceKey=shop"),
      (r) => r.status === 404,
    );
    const missing = await pub("/workspace/public/ui-chain?workspaceKey=no-such-workspace");
    expect(hiddenOne.status).toBe(404);
    expect(hiddenOne.text).toBe(missing.text);
    const strip = (r: HttpResponse) =>
      Object.fromEntries(
        Object.entries(r.headers).filter(([name]) => name !== "date" && name !== "x-request-id"),
      );
    expect(strip(hiddenOne)).toEqual(strip(missing));
    // Signed in, it shows.
    const signedIn = await pub("/workspace/public/ui-chain?workspaceKey=shop", {
      authorization: `Bearer ${operator}`,
    });
    expect(signedIn.json()).toEqual({ workspaceKey: "shop", chain: ["hello"] });
    // "Authenticated" means a session of this workspace (or a platform session). A
    // session of another workspace, or one with no scope, is as anonymous: the same 404, for the chain,
    // the theme and the navigation.
    const own = await mintToken({ scope: "workspace", workspaceKey: "shop", permissions: [] });
    const other = await mintToken({ scope: "workspace", workspaceKey: "default", permissions: ["*"] });
    const noScope = await mintToken({ permissions: ["*"] });
    expect(
      (await pub("/workspace/public/ui-chain?workspaceKey=shop", { authorization: `Bearer ${own}` })).status,
    ).toBe(200);
    for (const token of [other, noScope]) {
      const auth = { authorization: `Bearer ${token}` };
      expect((await pub("/workspace/public/ui-chain?workspaceKey=shop", auth)).status).toBe(404);
      // The theme of a workspace the caller may not see is the empty one, as for an unknown workspace.
      expect((await pub("/workspace/public/theme?workspaceKey=shop", auth)).json()).toMatchObject({
        workspaceKey: "shop",
        themePluginId: null,
        valuesByKey: {},
      });
      expect((await pub("/workspace/public/navigation?workspaceKey=shop", auth)).status).toBe(404);
      const page = await pub("/surface/render", {
        host: "acme.example",
        "x-forwarded-uri": "/shop/x",
        authorization: `Bearer ${token}`,
      });
      expect(page.status).toBe(302);
    }
    await asOperator("PUT", "/api/workspaces/shop", {
      tenantKey: "acme",
      name: "Shop",
      type: "store",
      accessPolicy: "Public",
    });
  });

  it("navigation: the children of the surface's application root, each with its full path", async () => {
    const surface = await asOperator("PUT", "/api/surfaces/default?workspaceKey=shop", {
      name: "Shop",
      applicationRoot: {
        key: "root",
        title: "Shop",
        path: "app",
        children: [
          {
            key: "orders",
            title: "Orders",
            path: "orders",
            order: 2,
            children: [{ key: "open", title: "Open", path: "open" }],
          },
          { key: "catalog", title: "Catalog", path: "catalog", order: 1 },
          { key: "secret", title: "Hidden", path: "hidden", visible: false },
        ],
      },
    });
    expect(surface.status, surface.text).toBe(201);
    const nav = await pub("/workspace/public/navigation", {
      host: "acme.example",
      "x-forwarded-uri": "/shop/x",
    });
    expect(nav.status, nav.text).toBe(200);
    expect(nav.json()).toEqual({
      workspaceKey: "shop",
      surfaceKey: "default",
      items: [
        {
          key: "catalog",
          title: "Catalog",
          path: "catalog",
          fullPath: "/shop/app/catalog",
          order: 1,
          hasChildren: false,
        },
        {
          key: "orders",
          title: "Orders",
          path: "orders",
          fullPath: "/shop/app/orders",
          order: 2,
          hasChildren: true,
        },
      ],
    });
    const deeper = await pub("/workspace/public/navigation?parentKey=orders&path=/shop", {
      host: "acme.example",
    });
    expect(deeper.json()).toMatchObject({ items: [{ key: "open", fullPath: "/shop/app/orders/open" }] });
    // By key: under the workspace's first binding (shop.example.com, at /).
    expect((await pub("/workspace/public/navigation?workspaceKey=shop")).json()).toMatchObject({
      items: [{ key: "catalog", fullPath: "/app/catalog" }, { key: "orders" }],
    });
    // A workspaceKey given but blank is `default`, not "resolve from the
    // host"; without the parameter the host and path decide (above).
    const home = await asOperator("PUT", "/api/surfaces/default?workspaceKey=default", {
      name: "Home",
      applicationRoot: {
        key: "root",
        title: "Home",
        path: "",
        children: [{ key: "start", title: "Start", path: "start" }],
      },
    });
    expect(home.status, home.text).toBe(201);
    for (const blank of ["", "%20%20"]) {
      const byBlank = await pub(`/workspace/public/navigation?workspaceKey=${blank}`, {
        host: "acme.example",
        "x-forwarded-uri": "/shop/x",
      });
      expect(byBlank.status, byBlank.text).toBe(200);
      expect(byBlank.json()).toMatchObject({ workspaceKey: "default", items: [{ key: "start" }] });
    }
    expect((await pub("/workspace/public/navigation?workspaceKey=shop&surfaceKey=nope")).status).toBe(404);
    expect((await pub("/workspace/public/navigation?workspaceKey=nobody")).status).toBe(404);
    const dup = await asOperator("PUT", "/api/surfaces/dup?workspaceKey=shop", {
      name: "Dup",
      applicationRoot: {
        key: "a",
        title: "A",
        path: "",
        children: [{ key: "a", title: "A again", path: "x" }],
      },
    });
    expect(dup.status).toBe(400);
    expect((await asOperator("GET", "/api/surfaces?workspaceKey=shop")).json()).toMatchObject({
      items: [{ surfaceKey: "default", name: "Shop" }],
    });
    // Snippets.
    const snippet = await asOperator("PUT", "/api/snippets/footer?workspaceKey=shop", {
      content: "<p>© Acme</p>",
      contentType: "text/html",
    });
    expect(snippet.status).toBe(201);
    expect((await asOperator("GET", "/api/snippets?workspaceKey=shop")).json()).toMatchObject({
      items: [{ snippetKey: "footer", contentType: "text/html", content: "<p>© Acme</p>" }],
    });
    expect((await asOperator("DELETE", "/api/snippets/footer?workspaceKey=shop")).status).toBe(204);
    expect((await asOperator("DELETE", "/api/snippets/footer?workspaceKey=shop")).status).toBe(404);
  });

  it("suspending the tenant hides its workspaces on both gateways within a second", async () => {
    for (const base of gateways) {
      expect((await pub("/workspace/public/context", { host: "shop.example.com" }, base)).status).toBe(200);
    }
    const started = Date.now();
    expect((await asOperator("POST", "/api/tenants/acme/suspend")).json()).toMatchObject({
      state: "suspended",
    });
    for (const base of gateways) {
      const gone = await eventually(
        () => pub("/workspace/public/context", { host: "shop.example.com" }, base),
        (r) => r.status === 404,
        2_000,
      );
      expect(gone.status).toBe(404);
      expect((await pub("/workspace/public/resolve", { host: "shop.example.com" }, base)).json()).toEqual({
        resolved: false,
        workspaceKey: null,
      });
    }
    expect(Date.now() - started).toBeLessThan(1_000);
    expect((await asOperator("POST", "/api/tenants/acme/activate")).json()).toMatchObject({
      state: "active",
    });
    expect(
      (
        await eventually(
          () => pub("/workspace/public/context", { host: "shop.example.com" }),
          (r) => r.status === 200,
        )
      ).status,
    ).toBe(200);
  });

  it("deletes a tenant with its workspaces only when asked, leaving nothing behind", async () => {
    const refused = await asOperator("DELETE", "/api/tenants/acme");
    expect(refused.status).toBe(409);
    expect(refused.json()).toMatchObject({ workspaceCount: 2 });
    expect((await asOperator("DELETE", "/api/tenants/acme?deleteWorkspaces=true")).status).toBe(204);
    expect((await asOperator("GET", "/api/tenants/acme")).status).toBe(404);
    expect((await asOperator("GET", "/api/workspaces/shop")).status).toBe(404);
    // The registry forgets the chain, the theme and the grants of what went.
    const chain = await eventually(
      () => asOperator("GET", "/api/workspaces/shop/plugins"),
      (r) => r.json<{ chain: unknown[] }>().chain.length === 0,
    );
    expect(chain.json()).toMatchObject({ chain: [] });
    // The tenant's own grants go with tenant.deleted, which another follower reads, after the workspaces'.
    const grants = await eventually(
      () => asOperator("GET", "/api/entitlements?tenantKey=acme"),
      (r) => r.json<{ items: unknown[] }>().items.length === 0,
    );
    expect(grants.json()).toEqual({ items: [], nextCursor: null });
    const deleted = await eventually(
      async () => events.filter((e) => e.subject.endsWith("workspace.deleted")).map((e) => e.workspaceKey),
      (keys) => keys.length >= 2,
    );
    expect(deleted.sort()).toEqual(["blog", "shop"]);
  });
});
