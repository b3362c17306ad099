/**
 * The public surface in a real browser (headless Chromium driven by playwright-core). A
 * page at a workspace's host loads bootstrap.js and reads window.__SVC_WORKSPACE_CONTEXT__; the rendered
 * surface of a workspace whose chain has two plugins (the primary extending the other's layout) shows the
 * overriding block. Chromium comes from Debian's package (.ci/run installs it); where none can be
 * installed the file is skipped with a message saying so.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, installPackage } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
if (CHROMIUM === undefined) {
  console.warn("browser tests skipped: no Chromium (apt-get install -y chromium installs it; .ci/run does)");
}

describe.runIf(CHROMIUM !== undefined || process.env.CI === "true")("the public surface in Chromium", () => {
  const work = mkdtempSync(join(tmpdir(), "svc-browser-"));
  const signer = fixtureSigner();
  let h: Awaited<ReturnType<typeof createHarness>>;
  let browser: Browser;
  let port: string;
  let operator: string;

  const api = bearerApi(() => `http://127.0.0.1:${port}`);
  const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

  async function templatePlugin(pluginId: string, templates: Record<string, string>) {
    const files = Object.fromEntries(
      Object.entries(templates).map(([n, src]) => [`views/surface/${n}`, src]),
    );
    const bytes = await codePlugin(work, signer, pluginId, "export class Plugin {}\n", [], {}, files);
    expect((await installPackage(`http://127.0.0.1:${port}`, operator, bytes)).status).toBe(201);
    expect((await asOperator("POST", `/api/plugins/${pluginId}/activate`)).status).toBe(200);
  }

  beforeAll(async () => {
    h = await createHarness();
    const env = {
      ...pluginStackEnv(work, { tests: signer }),
      // What the page shows is under test, not the render's time budget (1 s by default, then the shell is
      // served: test/surface-render.test.ts): a first render on a loaded machine may take longer.
      BackendHost__SurfaceRenderTimeoutMs: "15000",
    };
    await h.start(rbacService, env);
    await h.start(resolverService, env);
    await h.start(pluginRegistryService, env);
    const base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    port = new URL(base).port;
    operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
    expect((await asOperator("POST", "/api/tenants", { tenantKey: "web", name: "Web" })).status).toBe(201);
    expect(
      (
        await asOperator("PUT", "/api/workspaces/site", {
          tenantKey: "web",
          name: "The <Site>",
          type: "portal",
          bindings: [{ host: "site.test" }],
        })
      ).status,
    ).toBe(201);
    await templatePlugin("brand", {
      "index.njk":
        '{% extends "layout.njk" %}{% block headline %}Brand headline for {{ workspace.name }}{% endblock %}',
    });
    await templatePlugin("base-layout", {
      "layout.njk":
        '<!doctype html><html><head><title>{{ workspace.name }}</title></head><body><h1 id="headline">{% block headline %}Base headline{% endblock %}</h1><p id="footer">Base footer</p></body></html>',
    });
    await asOperator("PUT", "/api/entitlements", {
      items: [
        { tenantKey: "web", pluginId: "brand", entitled: true },
        { tenantKey: "web", pluginId: "base-layout", entitled: true },
      ],
    });
    expect(
      (await asOperator("PUT", "/api/workspaces/site/plugins", { chain: ["brand", "base-layout"] })).status,
    ).toBe(200);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", `--host-resolver-rules=MAP site.test 127.0.0.1`],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.stopAll();
    rmSync(work, { recursive: true, force: true });
  });

  it("loads bootstrap.js on a workspace's host and reads the workspace context", async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on("console", (m) => problems.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    page.on("requestfailed", (r) => problems.push(`failed: ${r.url()}`));
    await page.goto(`http://site.test:${port}/surface-app/?path=/`);
    // (The functions run in the page, where `globalThis` is its window.)
    type PageGlobals = { __SVC_WORKSPACE_CONTEXT__?: unknown; document: { title: string } };
    await page
      .waitForFunction(() => (globalThis as unknown as PageGlobals).__SVC_WORKSPACE_CONTEXT__, undefined, {
        timeout: 10_000,
      })
      .catch((error: Error) => {
        throw new Error(`${error.message}; the page said: ${problems.join(" | ")}`);
      });
    const context = await page.evaluate(
      () => (globalThis as unknown as PageGlobals).__SVC_WORKSPACE_CONTEXT__,
    );
    expect(context).toEqual({
      workspace: { key: "site", name: "The <Site>", type: "portal" },
      route: { publicBaseUrl: `http://site.test:${port}`, publicPathPrefix: "/" },
    });
    // The shell shows the workspace's name as text (never as markup).
    await page.waitForFunction(() => (globalThis as unknown as PageGlobals).document.title === "The <Site>");
    expect(await page.textContent("#svc-workspace-name")).toBe("The <Site>");
    await page.close();
  });

  it("shows the primary plugin's overriding block inside the other plugin's layout", async () => {
    const page = await browser.newPage();
    const response = await page.goto(`http://site.test:${port}/surface/render`);
    expect(response?.status()).toBe(200);
    expect(await page.textContent("#headline")).toBe("Brand headline for The <Site>");
    expect(await page.textContent("#footer")).toBe("Base footer");
    expect(await page.title()).toBe("The <Site>");
    await page.close();
  });
});
