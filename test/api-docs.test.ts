/**
 * The interactive API reference at /api/docs, opened in a real browser (headless
 * Chromium, playwright-core): Swagger UI renders the gateway's own OpenAPI document, served from the
 * package (no request leaves the gateway), under the gateway's content security policy, and an operation
 * is found under its tag. In production it is off unless BackendHost__EnableApiDocs=true.
 */
import { existsSync } from "node:fs";

import { gatewayService } from "@svc/service-gateway";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
if (CHROMIUM === undefined) {
  console.warn("API reference browser test skipped: no Chromium (apt-get install -y chromium; .ci/run does)");
}

const h = await createHarness();
let base: string;
afterAll(() => h.stopAll());
beforeAll(async () => {
  base = (await h.start(gatewayService, {})).hooks.httpAddress as string;
});

describe("GET /api/docs", () => {
  it("serves the reference page and the document it shows, without asking for a session", async () => {
    const page = await http(`${base}/api/docs`);
    expect(page.status).toBe(200);
    expect(String(page.headers["content-type"])).toMatch(/^text\/html/);
    expect(String(page.headers["content-security-policy"])).toContain("script-src 'self'");
    const shown = (await http(`${base}/api/docs/json`)).json<{ info: { title: string } }>();
    const served = (await http(`${base}/openapi.json`)).json<{ info: { title: string } }>();
    expect(shown).toEqual(served);
  });

  it("is off in production unless BackendHost__EnableApiDocs=true", async () => {
    const off = (await h.start(gatewayService, { NODE_ENV: "production" })).hooks.httpAddress as string;
    expect((await http(`${off}/api/docs`)).status).toBe(404);
    expect((await http(`${off}/openapi.json`)).status).toBe(200);
    const on = (
      await h.start(gatewayService, {
        NODE_ENV: "production",
        BackendHost__EnableApiDocs: "true",
      })
    ).hooks.httpAddress as string;
    expect((await http(`${on}/api/docs`)).status).toBe(200);
  });
});

describe.runIf(CHROMIUM !== undefined || process.env.CI === "true")("the API reference in Chromium", () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("renders the operations under their tags and finds one by its tag", async () => {
    const page = await browser.newPage();
    const requested: string[] = [];
    const violations: string[] = [];
    page.on("request", (r) => requested.push(r.url()));
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });
    await page.goto(`${base}/api/docs`);
    await page.locator(".information-container .title").waitFor({ timeout: 20_000 });
    expect(await page.locator(".information-container .title").innerText()).toContain("svc operator API");
    // The tag "webhooks", with its description, and the operation to create a subscription under it.
    const tag = page.locator("#operations-tag-webhooks");
    await expect(tag.innerText()).resolves.toContain("Webhook subscriptions");
    const section = page.locator(".opblock-tag-section", { has: tag });
    const create = section.locator(".opblock-post", {
      has: page.locator('.opblock-summary-path[data-path="/api/webhooks"]'),
    });
    await create.waitFor({ timeout: 10_000 });
    expect(await create.innerText()).toContain("Create a webhook subscription");
    // Opening it shows what it does and who may call it.
    await create.locator(".opblock-summary").click();
    await expect(create.locator(".opblock-description-wrapper").first().innerText()).resolves.toMatch(
      /webhook\.manage/,
    );
    // The filter box searches tags.
    await page.locator(".operation-filter-input").fill("tenants");
    await page.locator("#operations-tag-webhooks").waitFor({ state: "detached", timeout: 10_000 });
    expect(await page.locator("#operations-tag-tenants").count()).toBe(1);
    // Everything came from the gateway itself; nothing broke its content security policy.
    const origin = new URL(base).origin;
    expect(requested.filter((u) => !u.startsWith(origin) && !u.startsWith("data:"))).toEqual([]);
    expect(violations).toEqual([]);
    await page.close();
  }, 60_000);
});
