/**
 * `GET /surface/render` over a plugin chain (inheritance across three plugins, the
 * shell on a template error, a loop cut off, no file outside the chain readable, the 302 of an
 * Authenticated workspace), the redirect routes and the static shells, on real NATS and PostgreSQL.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { RunningService } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http, type HttpResponse, installPackage } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-render-"));
const signer = fixtureSigner();
let base: string;
let operator: string;

// A render's time budget short enough for the looping template's test, long enough for a first render of
// three plugins on a loaded machine (400 ms was not, in CI).
const env = { ...pluginStackEnv(work, { tests: signer }), BackendHost__SurfaceRenderTimeoutMs: "2000" };

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

const get = (path: string, headers: Record<string, string> = {}) => http(`${base}${path}`, { headers });

const ALPHA_INDEX =
  '{% extends "page.njk" %}{% block content %}Alpha content for {{ workspace.name }} ({{ SurfaceKey }}/{{ SurfaceType }}/{{ Locale }}) {{ snippets.footer }} {{ snippets.motto }}{% endblock %}';

/** Installs, entitles and activates a plugin whose only content is surface templates. */
async function templatePlugin(pluginId: string, templates: Record<string, string>): Promise<void> {
  const files = Object.fromEntries(
    Object.entries(templates).map(([name, src]) => [`views/surface/${name}`, src]),
  );
  const bytes = await codePlugin(work, signer, pluginId, "export class Plugin {}\n", [], {}, files);
  const installed = await installPackage(base, operator, bytes);
  expect(installed.status, installed.text).toBe(201);
  await asOperator("PUT", "/api/entitlements", { items: [{ tenantKey: "rt", pluginId, entitled: true }] });
  expect((await asOperator("POST", `/api/plugins/${pluginId}/activate`)).status).toBe(200);
}

async function chain(...ids: string[]) {
  expect((await asOperator("PUT", "/api/workspaces/rw/plugins", { chain: ids })).status).toBe(200);
}

const render = (headers: Record<string, string> = {}) =>
  get("/surface/render", { host: "render.example", ...headers });
const isShell = (r: HttpResponse) => r.text.includes('id="svc-shell"');
/**
 * Renders until `ok` holds (the last answer after `timeoutMs`): past the gateway's cache of a render
 * that fell back to the shell (a second; a render cut off by its budget on a slow machine falls back).
 */
const renderUntil = (ok: (r: HttpResponse) => boolean, timeoutMs = 15_000) =>
  eventually(render, ok, timeoutMs);

/** What the gateway and the registry logged (warnings and worse), as parsed JSON lines. */
const logged: Array<Record<string, unknown>> = [];
const logTo = { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) };
const warnings = (service: string, workspaceKey: string) =>
  logged.filter((l) => l.service === service && l.workspaceKey === workspaceKey);
let registry: RunningService;

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  registry = await h.start(pluginRegistryService, { ...env, LOG_LEVEL: "warn" }, { logTo });
  base = (await h.start(gatewayService, { ...env, LOG_LEVEL: "warn" }, { logTo })).hooks
    .httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  expect((await asOperator("POST", "/api/tenants", { tenantKey: "rt", name: "Render tenant" })).status).toBe(
    201,
  );
  expect(
    (
      await asOperator("PUT", "/api/workspaces/rw", {
        tenantKey: "rt",
        name: "Render <b>Shop</b>",
        bindings: [{ host: "render.example" }],
      })
    ).status,
  ).toBe(201);
  await asOperator("PUT", "/api/surfaces/default?workspaceKey=rw", {
    name: "Render",
    applicationRoot: {
      key: "root",
      title: "Root",
      path: "",
      children: [{ key: "a", title: "About", path: "about" }],
    },
  });
  await asOperator("PUT", "/api/snippets/footer?workspaceKey=rw", {
    content: "<em>made by us</em>",
    contentType: "text/html",
  });
  await asOperator("PUT", "/api/snippets/motto?workspaceKey=rw", { content: "<b>plain</b>" });
  await templatePlugin("alpha", { "index.njk": ALPHA_INDEX });
  await templatePlugin("beta", {
    "page.njk":
      '{% extends "layout.njk" %}{% block body %}<section>{% block content %}Beta default{% endblock %}</section>{% endblock %}',
    "index.njk": "Beta's own entry (not used: alpha is the primary)",
  });
  await templatePlugin("gamma", {
    "layout.njk":
      '<!doctype html><html><body>{% block body %}Gamma body{% endblock %}<nav>{% for item in navigation %}<a href="{{ item.fullPath }}">{{ item.title }}</a>{% endfor %}</nav></body></html>',
  });
});

afterAll(async () => {
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

describe("GET /surface/render", () => {
  it("renders the primary's entry with the whole chain on the loader path (three plugins)", async () => {
    expect(isShell(await render())).toBe(true); // no chain yet: the shell
    await chain("alpha", "beta", "gamma");
    const page = await renderUntil((r) => !isShell(r));
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    // alpha's block inside beta's page inside gamma's layout.
    expect(page.text).toContain("<section>Alpha content for Render &lt;b&gt;Shop&lt;/b&gt; (default/spa/de)");
    expect(page.text).toContain("<em>made by us</em> &lt;b&gt;plain&lt;/b&gt;");
    expect(page.text).toContain('<nav><a href="/about">About</a></nav>');
    expect(page.text).not.toContain("Beta default");
  });

  it("falls back to the next plugin of the chain while the primary is not active, and back again", async () => {
    expect((await asOperator("POST", "/api/plugins/alpha/deactivate")).status).toBe(200);
    // alpha keeps its place in the stored chain, but beta is the primary now.
    const fallback = await renderUntil((r) => r.text.includes("Beta's own entry"));
    expect(fallback.text).not.toContain("Alpha content");
    const stored = (await asOperator("GET", "/api/workspaces/rw/plugins")).json<{
      chain: Array<{ pluginId: string; state: string }>;
    }>().chain;
    expect(stored.map((p) => [p.pluginId, p.state])).toEqual([
      ["alpha", "inactive"],
      ["beta", "active"],
      ["gamma", "active"],
    ]);
    expect((await asOperator("POST", "/api/plugins/alpha/activate")).status).toBe(200);
    const back = await renderUntil((r) => r.text.includes("Alpha content"));
    expect(back.text).toContain("<section>Alpha content for Render");
  });

  it("serves the shell with 200 when the entry template throws, and logs it", async () => {
    await templatePlugin("broken", { "index.njk": "{% extends 'nowhere.njk' %}" });
    await chain("broken", "gamma");
    const page = await renderUntil((r) => isShell(r));
    expect(page.status).toBe(200);
    expect(isShell(page)).toBe(true);
    // The registry logs the template's error, the gateway the workspace and the cause.
    expect(warnings("plugin-registry", "rw").some((l) => l.pluginId === "broken")).toBe(true);
    expect(warnings("gateway", "rw").some((l) => l.cause === "template-error")).toBe(true);
  });

  it("renders a page that fell back to the shell again after a second, not after the cache's five", async () => {
    await templatePlugin("failing", { "index.njk": "{% extends 'nowhere.njk' %}" });
    await chain("failing", "gamma");
    // The registry logs each render of the failing entry; the gateway caches the fallback it got.
    const renders = () => warnings("plugin-registry", "rw").filter((l) => l.pluginId === "failing").length;
    expect(isShell(await renderUntil((r) => isShell(r)))).toBe(true);
    const before = renders();
    // Within 3.5 s of the first render (the cache keeps a rendered page 5 s): rendered again.
    await eventually(
      async () => {
        await render();
        return renders();
      },
      (n) => n > before,
      3_500,
      100,
    );
    expect(renders()).toBeGreaterThan(before);
  });

  it("serves the shell with 200 for a chain whose primary has no index.njk, and logs why", async () => {
    await chain("gamma");
    const page = await renderUntil((r) => isShell(r));
    expect(page.status).toBe(200);
    expect(warnings("gateway", "rw").some((l) => l.cause === "no-entry")).toBe(true);
  });

  it("reads nothing outside the chain's template directories", async () => {
    await templatePlugin("sneaky", {
      "index.njk": '{% include "../../registry.json" %}{% include "/etc/passwd" %}',
    });
    await chain("sneaky");
    const page = await renderUntil((r) => isShell(r));
    expect(isShell(page)).toBe(true);
    expect(page.text).not.toContain("root:");
    expect(page.text).not.toContain("pluginId");
  });

  it("cuts off a template that loops, and goes on rendering", async () => {
    await templatePlugin("looping", {
      "index.njk": "{% for i in range(0, 1000000000) %}{{ i }}{% endfor %}",
    });
    await chain("looping");
    const started = Date.now();
    const page = await renderUntil((r) => isShell(r), 10_000);
    expect(isShell(page)).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
    await chain("alpha", "beta", "gamma");
    expect((await renderUntil((r) => r.text.includes("Alpha content"))).text).toContain("Alpha content");
  });

  it("sends anonymous callers of an Authenticated workspace to /login with a same-origin returnUrl", async () => {
    await asOperator("PUT", "/api/workspaces/rw", {
      tenantKey: "rt",
      name: "Render <b>Shop</b>",
      accessPolicy: "Authenticated",
      bindings: [{ host: "render.example" }],
    });
    const redirected = await eventually(
      () => render({ "x-forwarded-uri": "/deep/page?q=1" }),
      (r) => r.status === 302,
    );
    expect(redirected.headers.location).toBe("/login?workspaceKey=rw&returnUrl=%2Fdeep%2Fpage%3Fq%3D1");
    const evil = await render({ "x-forwarded-uri": "//evil.example/steal" });
    expect(evil.headers.location).toBe("/login?workspaceKey=rw&returnUrl=%2F");
    const signedIn = await render({ authorization: `Bearer ${operator}` });
    expect(signedIn.status).toBe(200);
    expect(signedIn.text).toContain("Alpha content");
    await asOperator("PUT", "/api/workspaces/rw", {
      tenantKey: "rt",
      name: "Render <b>Shop</b>",
      bindings: [{ host: "render.example" }],
    });
  });

  it("answers 404 when no visible workspace resolves", async () => {
    const none = await get("/surface/render", { host: "nothing.example" });
    expect(none.status).toBe(404);
    expect(none.headers["content-type"]).toMatch(/^text\/html/);
  });
});

describe("redirects and shells", () => {
  it("forwards /, /login and other pages to the workspace shell, the admin shell or /404", async () => {
    const root = await get("/", { host: "render.example" });
    expect(root.status).toBe(302);
    expect(root.headers.location).toBe("/surface-app/?path=%2F");
    expect((await get("/", { host: "admin.example" })).headers.location).toBe("/admin/");
    expect((await get("/shop/page", { host: "render.example" })).headers.location).toBe(
      "/surface-app/?path=%2Fshop%2Fpage",
    );
    expect((await get("/shop/page", { host: "nothing.example" })).headers.location).toBe("/404");
    expect((await get("/login?returnUrl=/x", { host: "render.example" })).headers.location).toBe(
      "/surface-app/login?workspaceKey=rw&returnUrl=%2Fx",
    );
    // A workspaceKey given but blank is `default`, whatever the host.
    expect(
      (await get("/login?workspaceKey=&returnUrl=/x", { host: "render.example" })).headers.location,
    ).toBe("/surface-app/login?workspaceKey=default&returnUrl=%2Fx");
    expect(
      (await get("/login?returnUrl=https://evil.example", { host: "admin.example" })).headers.location,
    ).toBe("/admin/login?returnUrl=%2F");
    const notFound = await get("/404");
    expect(notFound.status).toBe(404);
    expect(notFound.headers["content-type"]).toMatch(/^text\/html/);
    // Files and the APIs keep their own 404s.
    const favicon = await get("/favicon.ico", { host: "render.example" });
    expect(favicon.status).toBe(404);
    expect(favicon.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect((await get("/api/nothing")).status).toBe(404);
    expect((await http(`${base}/nothing`, { method: "POST" })).status).toBe(404);
  });

  it("serves the shells with their content types and caching", async () => {
    const shell = await get("/surface-app/");
    expect(shell.status).toBe(200);
    expect(shell.headers["content-type"]).toMatch(/^text\/html/);
    expect(shell.headers["cache-control"]).toBe("no-cache");
    const script = await get("/surface-app/shell.js");
    expect(script.headers["content-type"]).toMatch(/javascript/);
    expect(script.headers["cache-control"]).toBe("public, max-age=300");
    expect((await get("/surface-app/login?workspaceKey=rw")).text).toContain('id="svc-shell"');
    const admin = await get("/admin/");
    expect(admin.status).toBe(200);
    expect(admin.text).toContain("svc admin");
    expect((await get("/admin")).headers.location).toBe("/admin/");
    expect((await get("/surface-app/missing.js")).status).toBe(404);
  });

  it("answers the shells' files with their bytes, revalidates them by ETag, and serves no path outside them", async () => {
    const onDisk = readFileSync(new URL("../services/gateway/static/admin/assets/app.js", import.meta.url));
    const script = await get("/admin/assets/app.js");
    expect(script.status).toBe(200);
    expect(script.text).toBe(onDisk.toString("utf8"));
    const etag = script.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const revalidated = await get("/admin/assets/app.js", { "if-none-match": etag });
    expect(revalidated.status).toBe(304);
    expect(revalidated.text).toBe("");
    expect((await get("/admin/assets/app.js", { "if-none-match": '"other"' })).status).toBe(200);
    // A proxy that compresses the answer weakens its ETag, and a client may send several (RFC 9110 13.1.2).
    expect((await get("/admin/assets/app.js", { "if-none-match": `W/${etag}` })).status).toBe(304);
    expect((await get("/admin/assets/app.js", { "if-none-match": `"other", ${etag}` })).status).toBe(304);
    expect((await get("/admin/assets/app.js", { "if-none-match": "*" })).status).toBe(304);
    // An end-to-end reload gets the whole file.
    const reload = { "if-none-match": etag, "cache-control": "no-cache" };
    expect((await get("/admin/assets/app.js", reload)).status).toBe(200);
    const head = await http(`${base}/admin/assets/app.css`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers["content-type"]).toMatch(/^text\/css/);
    expect(head.text).toBe("");
    // The same file under the other shell, or a path climbing out of a shell (raw, as a client may send it),
    // names no file.
    for (const path of [
      "/surface-app/assets/app.js",
      "/admin/../404.html",
      "/admin/assets/../../../package.json",
      "/admin/%2e%2e/%2e%2e/package.json",
      "/surface-app/..%2f..%2fpackage.json",
    ]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(404);
      expect(answer.text, path).not.toContain("svc-platform");
    }
  });
});

describe("the render context", () => {
  it("carries tokens.themePluginId once the workspace has a theme plugin", async () => {
    const files = {
      "views/surface/index.njk": "theme=[{{ tokens.themePluginId }}] locale={{ Locale }}",
      "theme.json": JSON.stringify({ surface: "workspace", definitions: [] }),
    };
    const bytes = await codePlugin(work, signer, "themed", "export class Plugin {}\n", [], {}, files);
    expect((await installPackage(base, operator, bytes)).status).toBe(201);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "rt", pluginId: "themed", entitled: true }],
    });
    expect((await asOperator("POST", "/api/plugins/themed/activate")).status).toBe(200);
    await chain("themed");
    expect((await renderUntil((r) => r.text.includes("theme=["))).text).toContain("theme=[] locale=de");
    const chosen = await asOperator("PUT", "/api/themes/workspaces/rw", { themePluginId: "themed" });
    expect(chosen.status, chosen.text).toBe(200);
    expect((await renderUntil((r) => r.text.includes("theme=[themed]"))).text).toContain(
      "theme=[themed] locale=de",
    );
  });
});

describe("GET /surface/render with a chain plugin refused at load", () => {
  it("leaves it out, renders with the next plugin as the primary, and the registry says which and why", async () => {
    await chain("alpha", "beta", "gamma");
    // The registry starts again with alpha's entry template revoked: its stored package is refused.
    const alphaEntry = createHash("sha256").update(ALPHA_INDEX).digest("hex");
    await registry.stop();
    registry = await h.start(
      pluginRegistryService,
      { ...env, LOG_LEVEL: "warn", BackendHost__RevokedContentHashes__0: alphaEntry },
      { logTo },
    );
    const page = await eventually(
      () => render({ "x-forwarded-uri": "/alpha-refused" }),
      (r) => r.text.includes("Beta's own entry"),
    );
    expect(page.text).not.toContain("Alpha content");
    expect(
      logged.some(
        (l) =>
          l.service === "plugin-registry" &&
          l.pluginId === "alpha" &&
          String(l.reason).startsWith("revoked-content"),
      ),
    ).toBe(true);
    await registry.stop();
    registry = await h.start(pluginRegistryService, { ...env, LOG_LEVEL: "warn" }, { logTo });
    expect((await asOperator("POST", "/api/plugins/alpha/activate")).status).toBe(200);
  });
});

describe("GET /surface/render without the registry", () => {
  it("serves the shell with 200 and logs the workspace and the cause", async () => {
    await chain("alpha", "beta", "gamma");
    await registry.stop();
    // A path not rendered before: no cached page stands in.
    const page = await render({ "x-forwarded-uri": "/registry-down" });
    expect(page.status).toBe(200);
    expect(isShell(page)).toBe(true);
    expect(warnings("gateway", "rw").some((l) => String(l.cause).startsWith("SVC_SERVICE_UNAVAILABLE"))).toBe(
      true,
    );
  });
});
