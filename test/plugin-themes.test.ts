/**
 * Themes through the gateway on real NATS and PostgreSQL. The catalogue lists the
 * template definitions of installed packages (and ones registered through the API); a workspace chooses an
 * entitled theme plugin; its settings are checked against each field's type and options; the effective
 * templates resolve over the theme plugin and the chain by priority; a broken theme.json is refused.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { examplePackage } from "../scripts/lib/example-plugin.js";
import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http, type HttpResponse, installPackage } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-themes-"));
const signer = fixtureSigner();
let base: string;
let operator: string;
let registry: Awaited<ReturnType<typeof h.start>>;

const env = pluginStackEnv(work, { dev: true, tests: signer });

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

const install = (bytes: Buffer): Promise<HttpResponse> => installPackage(base, operator, bytes);

/** A package with only a theme.json (and an entry module that does nothing). */
const themePlugin = (pluginId: string, theme: unknown) =>
  codePlugin(
    work,
    signer,
    pluginId,
    "export class Plugin {}\n",
    [],
    {},
    { "theme.json": JSON.stringify(theme) },
  );

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  registry = await h.start(pluginRegistryService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  await h.sql(`INSERT INTO resolver.tenants (key, name) VALUES ('acme', 'Acme')`);
  await h.sql(`INSERT INTO resolver.workspaces (key, tenant_key, name) VALUES ('shop', 'acme', 'Shop')`);
  expect((await install(await examplePackage())).status).toBe(201);
});

afterAll(async () => {
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

describe("theme catalogue", () => {
  it("lists the definitions of installed packages, and registers and switches others", async () => {
    const listed = await asOperator("GET", "/api/themes/definitions?pluginId=hello");
    expect(listed.status, listed.text).toBe(200);
    expect(listed.json()).toEqual({
      items: [
        {
          templateKey: "index",
          pluginId: "hello",
          version: "1.0.0",
          displayName: "Hello page",
          templatePath: "views/surface/index.njk",
          parentTemplateKey: null,
          surface: "workspace",
          scope: "workspace",
          isActive: true,
          priority: 100,
          source: "package",
        },
      ],
    });
    const put = await asOperator("PUT", "/api/themes/definitions/footer/plugins/hello/versions/1.0.0", {
      displayName: "Footer",
      parentTemplateKey: "index",
      priority: 5,
    });
    expect(put.status, put.text).toBe(201);
    expect(put.json()).toMatchObject({
      templateKey: "footer",
      source: "api",
      templatePath: "views/surface/footer.html",
    });
    const off = await asOperator(
      "PUT",
      "/api/themes/definitions/footer/plugins/hello/versions/1.0.0/activation",
      {
        isActive: false,
      },
    );
    expect(off.json()).toMatchObject({ isActive: false });
    expect(
      (await asOperator("PUT", "/api/themes/definitions/x/plugins/hello/versions/9.9.9", {})).status,
    ).toBe(404);
    expect(
      (
        await asOperator("PUT", "/api/themes/definitions/x/plugins/hello/versions/1.0.0", {
          templatePath: "../../etc/passwd",
        })
      ).status,
    ).toBe(400);
  });

  it("refuses a package whose theme.json is not JSON, naming the file", async () => {
    const bytes = await codePlugin(
      work,
      signer,
      "broken-theme",
      "export class Plugin {}\n",
      [],
      {},
      {
        "theme.json": "{ this is not json",
      },
    );
    const refused = await install(bytes);
    expect(refused.status).toBe(422);
    expect(refused.json()).toMatchObject({
      code: "SVC_PLUGIN_REFUSED",
      reason: "theme-invalid",
      path: "theme.json",
    });
  });
});

describe("a workspace's theme", () => {
  it("is chosen among entitled theme plugins, with settings checked against the fields", async () => {
    // Nothing chosen: nulls and empty values.
    expect((await asOperator("GET", "/api/themes/workspaces/shop")).json()).toEqual({
      workspaceKey: "shop",
      themePluginId: null,
      themeVersion: null,
      valuesByKey: {},
      sectionLayouts: [],
    });
    const unentitled = await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "hello" });
    expect(unentitled.status).toBe(400);
    expect(unentitled.json<{ detail: string }>().detail).toContain("not entitled");
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "hello", entitled: true }],
    });
    // A theme serves only while its plugin is active.
    const inactive = await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "hello" });
    expect(inactive.status).toBe(400);
    expect(inactive.json<{ detail: string }>().detail).toContain("not active");
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    const chosen = await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "hello" });
    expect(chosen.status, chosen.text).toBe(200);
    expect(chosen.json()).toEqual({
      workspaceKey: "shop",
      themePluginId: "hello",
      themeVersion: "1.0.0",
      valuesByKey: { greeting: "Hello", accent: "#3366ff", layout: "wide" },
      sectionLayouts: [
        { section: "Content", keys: ["greeting"] },
        { section: "Look", keys: ["accent", "layout"] },
      ],
    });

    const settings = await asOperator("GET", "/api/themes/workspaces/shop/settings");
    expect(settings.json()).toMatchObject({
      themePluginId: "hello",
      themeVersion: "1.0.0",
      fields: [
        { key: "greeting", type: "text", value: "Hello", group: "Content" },
        { key: "accent", type: "color", value: "#3366ff", group: "Look" },
        {
          key: "layout",
          type: "select",
          options: ["wide", "narrow"],
          helpText: "How wide the page content runs",
        },
      ],
    });
    const bad = await asOperator("PUT", "/api/themes/workspaces/shop/settings", {
      values: { accent: "red", layout: "huge", nope: "x" },
    });
    expect(bad.status).toBe(400);
    expect(
      bad
        .json<{ errors: Array<{ field: string }> }>()
        .errors.map((e) => e.field)
        .sort(),
    ).toEqual(["/body/values/accent", "/body/values/layout", "/body/values/nope"]);
    const good = await asOperator("PUT", "/api/themes/workspaces/shop/settings", {
      values: { accent: "#000000", layout: "narrow", greeting: "Moin" },
    });
    expect(good.status, good.text).toBe(200);
    expect(good.json()).toMatchObject({
      valuesByKey: { greeting: "Moin", accent: "#000000", layout: "narrow" },
    });
    // null: back to the default.
    const reset = await asOperator("PUT", "/api/themes/workspaces/shop/settings", {
      values: { greeting: null },
    });
    expect(reset.json()).toMatchObject({ valuesByKey: { greeting: "Hello", accent: "#000000" } });

    // Removing the theme keeps the values for a later choice.
    expect((await asOperator("DELETE", "/api/themes/workspaces/shop")).status).toBe(204);
    expect((await asOperator("GET", "/api/themes/workspaces/shop")).json()).toMatchObject({
      themePluginId: null,
    });
    expect((await asOperator("DELETE", "/api/themes/workspaces/shop")).status).toBe(404);
    await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "hello" });
    expect((await asOperator("GET", "/api/themes/workspaces/shop")).json()).toMatchObject({
      valuesByKey: { accent: "#000000", layout: "narrow" },
    });
  });

  it("resolves the effective templates over the theme plugin and the chain, by priority", async () => {
    expect(
      (
        await install(
          await themePlugin("brand", {
            definitions: [
              { key: "index", extends: "layout", priority: 200 },
              { key: "layout", templatePath: "views/surface/layout.njk" },
            ],
          }),
        )
      ).status,
    ).toBe(201);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "brand", entitled: true }],
    });
    expect((await asOperator("POST", "/api/plugins/brand/activate")).status).toBe(200);
    expect((await asOperator("PUT", "/api/workspaces/shop/plugins", { chain: ["brand"] })).status).toBe(200);

    const effective = await asOperator("GET", "/api/themes/workspaces/shop/effective");
    expect(effective.status, effective.text).toBe(200);
    expect(effective.json()).toMatchObject({
      workspaceKey: "shop",
      themePluginId: "hello",
      templates: [
        { templateKey: "index", pluginId: "brand", inheritance: ["index", "layout"], priority: 200 },
        { templateKey: "layout", pluginId: "brand", templatePath: "views/surface/layout.njk" },
      ],
    });
    // Switching brand's index off lets the theme plugin's index win.
    await asOperator("PUT", "/api/themes/definitions/index/plugins/brand/versions/1.0.0/activation", {
      isActive: false,
    });
    const after = (await asOperator("GET", "/api/themes/workspaces/shop/effective")).json<{
      templates: Array<{ templateKey: string; pluginId: string }>;
    }>();
    expect(after.templates.find((t) => t.templateKey === "index")?.pluginId).toBe("hello");

    // The caller's own workspace: a workspace session's, or ?workspaceKey for a platform session.
    const member = await mintToken({
      scope: "workspace",
      workspaceKey: "shop",
      permissions: ["extension.read"],
    });
    const mine = await api("GET", "/workspace/themes/effective", member);
    expect(mine.status, mine.text).toBe(200);
    expect(mine.json()).toMatchObject({ workspaceKey: "shop", themePluginId: "hello" });
    expect((await api("GET", "/workspace/themes/effective?workspaceKey=other", member)).status).toBe(404);
    expect((await asOperator("GET", "/workspace/themes/effective?workspaceKey=shop")).json()).toMatchObject({
      workspaceKey: "shop",
    });
  });
});

/**
 * Themes respect tenants as chains do. The attacks: choosing a theme skipped the
 * delegation check chains have; a theme kept serving after its grant was withdrawn; setting values stayed
 * in force under a theme whose field has another type; a workspace admin removed from its chain plugins
 * the platform put there and never delegated; the signature report unpacked every package on each call.
 */
describe("themes and chains respect tenants", () => {
  const admin = () =>
    mintToken({
      scope: "workspace",
      workspaceKey: "shop",
      permissions: ["extension.read", "extension.update", "plugin.assign", "plugin.read"],
    });
  const publicTheme = async () =>
    (await http(`${base}/workspace/public/theme?workspaceKey=shop`)).json<{ themePluginId: string | null }>();

  it("a workspace admin chooses only a delegated theme", async () => {
    const refused = await api("PUT", "/api/themes/workspaces/shop", await admin(), {
      themePluginId: "hello",
    });
    expect(refused.status).toBe(400);
    expect(refused.json<{ detail: string }>().detail).toContain("not delegated");
    const delegate = await asOperator("PUT", "/api/tenants/acme/plugins/hello/delegation", {
      delegated: true,
    });
    expect(delegate.status, delegate.text).toBe(200);
    expect(
      (await api("PUT", "/api/themes/workspaces/shop", await admin(), { themePluginId: "hello" })).status,
    ).toBe(200);
  });

  it("a theme stops serving when its grant is withdrawn, everywhere, and serves again when it is back", async () => {
    await until(async () => (await publicTheme()).themePluginId === "hello");
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "hello", entitled: false }],
    });
    expect((await asOperator("GET", "/api/themes/workspaces/shop")).json()).toMatchObject({
      themePluginId: null,
    });
    expect((await asOperator("GET", "/api/themes/workspaces/shop/settings")).json()).toMatchObject({
      themePluginId: null,
      fields: [],
    });
    const effective = (await asOperator("GET", "/api/themes/workspaces/shop/effective")).json<{
      themePluginId: string | null;
      templates: Array<{ pluginId: string }>;
    }>();
    expect(effective.themePluginId).toBeNull();
    expect(effective.templates.some((t) => t.pluginId === "hello")).toBe(false);
    await until(async () => (await publicTheme()).themePluginId === null);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "hello", entitled: true }],
    });
    expect((await asOperator("GET", "/api/themes/workspaces/shop")).json()).toMatchObject({
      themePluginId: "hello",
    });
  });

  it("checks stored values again against the fields of a newly chosen theme", async () => {
    // hello's accent is a colour, set to #000000 above; numbers' accent is a number.
    expect(
      (
        await install(
          await themePlugin("numbers", {
            config: { fields: { accent: { label: "Accent size", type: "number", value: "3" } } },
          }),
        )
      ).status,
    ).toBe(201);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "numbers", entitled: true }],
    });
    expect((await asOperator("POST", "/api/plugins/numbers/activate")).status).toBe(200);
    const switched = await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "numbers" });
    expect(switched.status, switched.text).toBe(200);
    expect(switched.json()).toMatchObject({ valuesByKey: { accent: "3" } });
    // Back to hello: the stored colour fits again.
    const back = await asOperator("PUT", "/api/themes/workspaces/shop", { themePluginId: "hello" });
    expect(back.json()).toMatchObject({ valuesByKey: { accent: "#000000" } });
  });

  it("a workspace admin changes only delegated chain entries", async () => {
    // brand was put in shop's chain by the platform and is not delegated to acme.
    const dropped = await api("PUT", "/api/workspaces/shop/plugins", await admin(), { chain: [] });
    expect(dropped.status).toBe(400);
    expect(dropped.json<{ errors: Array<{ field: string }> }>().errors[0]?.field).toBe("/body/chain");
    const withDelegated = await api("PUT", "/api/workspaces/shop/plugins", await admin(), {
      chain: ["hello", "brand"],
    });
    expect(withDelegated.status, withDelegated.text).toBe(200);
    const chain = (await asOperator("GET", "/api/workspaces/shop/plugins")).json<{
      chain: Array<{ pluginId: string }>;
    }>();
    expect(chain.chain.map((c) => c.pluginId)).toEqual(["hello", "brand"]);
    expect(
      (await api("PUT", "/api/workspaces/shop/plugins", await admin(), { chain: ["brand"] })).status,
    ).toBe(200);
  });

  it("verifies a stored package once per hash and trust settings for the signature report", async () => {
    const verifications = async () => {
      const metric = registry.deps.metrics.getSingleMetric("svc_plugin_lifecycle_operations_total");
      const { values } = (await metric?.get()) ?? { values: [] };
      return values.filter((v) => v.labels.action === "verify").reduce((n, v) => n + v.value, 0);
    };
    const first = await api("GET", "/api/plugins/signature-report", await admin());
    expect(first.status, first.text).toBe(200);
    const after = await verifications();
    const second = await api("GET", "/api/plugins/signature-report", await admin());
    expect(second.json<{ items: unknown[] }>().items).toEqual(first.json<{ items: unknown[] }>().items);
    expect(await verifications()).toBe(after);
  });
});
