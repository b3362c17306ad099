/**
 * Themes through their contracts, with the theme tables, the grants and the resolver's tenancy in memory:
 * no NATS, no PostgreSQL. A workspace chooses only an installed, active theme plugin it is entitled to
 * (a workspace session only one delegated to its tenant); setting values are checked against the theme's
 * fields and shown only while they fit them; the effective templates take, per key, the highest priority,
 * then the theme plugin, then chain order.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes, refusalOf } from "@svc/contracts";
import { ErrorCode, type SvcError } from "@svc/errors";
import type { Theme, ThemeField } from "@svc/plugin-package";
import { beforeEach, describe, expect, it } from "vitest";

import type { GrantTable } from "./entitlements.js";
import { memoryTenancy } from "./memory-tenancy.js";
import {
  activateDefinition,
  deleteWorkspaceTheme,
  getEffective,
  getEffectiveCurrent,
  getSettings,
  getWorkspaceTheme,
  putDefinition,
  putSettings,
  putWorkspaceTheme,
  type SelectedTheme,
  type TemplateDefinition,
  type ThemeTables,
} from "./themes.js";

const field = (key: string, type: string, more: Partial<ThemeField> = {}): ThemeField => ({
  key,
  label: key,
  type,
  helpText: null,
  value: null,
  required: false,
  group: null,
  options: [],
  order: 0,
  ...more,
});

const brandTheme: Theme = {
  surface: "workspace",
  definitions: [],
  fields: [
    field("primary", "color", { value: "#112233", group: "Colours" }),
    field("accent", "color", { group: "Colours" }),
    field("title", "text", { required: true, value: "Shop" }),
  ],
};
/** The same keys with other types: a value stored under one theme may not fit the other. */
const plainTheme: Theme = {
  surface: "workspace",
  definitions: [],
  fields: [field("primary", "select", { options: ["light", "dark"], value: "light" })],
};

/** Installed plugins by id. */
const plugins: Record<string, { tier: string; active: boolean; theme: Theme | null }> = {
  brand: { tier: "application", active: true, theme: brandTheme },
  plain: { tier: "application", active: true, theme: plainTheme },
  sleepy: { tier: "application", active: false, theme: brandTheme },
  shopfront: { tier: "application", active: true, theme: null },
  blogkit: { tier: "application", active: true, theme: null },
};
let tenantGrants: Record<string, readonly string[]>;
const workspaces: Record<string, string> = { shop: "acme", news: "zeta", default: "acme" };

const entitled = (pluginId: string, tenantKey: string) =>
  plugins[pluginId]?.tier === "system" || (tenantGrants[tenantKey] ?? []).includes(pluginId);

const grants: GrantTable = {
  tier: async (pluginId) => plugins[pluginId]?.tier ?? null,
  grantsInForce: async (pluginId, tenantKey) =>
    entitled(pluginId, tenantKey) ? [{ subjectType: "tenant", expiresAt: null }] : [],
};

const definition = (
  templateKey: string,
  pluginId: string,
  more: Partial<TemplateDefinition> = {},
): TemplateDefinition => ({
  templateKey,
  pluginId,
  version: "1.0.0",
  displayName: templateKey,
  templatePath: `views/surface/${templateKey}.html`,
  parentTemplateKey: null,
  surface: "workspace",
  scope: "workspace",
  isActive: true,
  priority: 100,
  source: "theme.json",
  ...more,
});

class MemoryThemes implements ThemeTables {
  definitionsStored: TemplateDefinition[] = [];
  readonly chosen = new Map<string, string>();
  readonly values = new Map<string, Map<string, string>>();
  readonly chains = new Map<string, string[]>();
  readonly delegations = new Set<string>();
  readonly audits: string[] = [];

  private inForce(pluginId: string, workspaceKey: string) {
    const p = plugins[pluginId];
    return p !== undefined && p.active && entitled(pluginId, workspaces[workspaceKey] ?? "");
  }

  async definitions({ pluginId, surface }: { pluginId: string | null; surface: string | null }) {
    return this.definitionsStored
      .filter(
        (d) => (pluginId === null || d.pluginId === pluginId) && (surface === null || d.surface === surface),
      )
      .sort((a, b) => a.templateKey.localeCompare(b.templateKey) || b.priority - a.priority);
  }
  async installed(pluginId: string, version: string) {
    return pluginId in plugins && version === "1.0.0";
  }
  async definition(templateKey: string, pluginId: string, version: string) {
    return (
      this.definitionsStored.find(
        (d) => d.templateKey === templateKey && d.pluginId === pluginId && d.version === version,
      ) ?? null
    );
  }
  async putDefinition(d: Omit<TemplateDefinition, "source">) {
    const stored = { ...d, source: "api" };
    this.definitionsStored = [
      ...this.definitionsStored.filter(
        (x) => !(x.templateKey === d.templateKey && x.pluginId === d.pluginId && x.version === d.version),
      ),
      stored,
    ];
    return stored;
  }
  async setActive(templateKey: string, pluginId: string, version: string, isActive: boolean) {
    const found = await this.definition(templateKey, pluginId, version);
    if (found === null) return null;
    const changed = { ...found, isActive };
    this.definitionsStored = this.definitionsStored.map((d) => (d === found ? changed : d));
    return changed;
  }
  async selected(workspaceKey: string): Promise<SelectedTheme | null> {
    const pluginId = this.chosen.get(workspaceKey);
    if (pluginId === undefined || !this.inForce(pluginId, workspaceKey)) return null;
    return { pluginId, version: "1.0.0", theme: plugins[pluginId]?.theme ?? null };
  }
  async plugin(pluginId: string) {
    const p = plugins[pluginId];
    return p === undefined ? null : { theme: p.theme, active: p.active };
  }
  async delegated(tenantKey: string, pluginId: string) {
    return this.delegations.has(`${tenantKey}/${pluginId}`);
  }
  async choose(workspaceKey: string, pluginId: string) {
    this.chosen.set(workspaceKey, pluginId);
  }
  async unchoose(workspaceKey: string) {
    const had = this.chosen.get(workspaceKey) ?? null;
    this.chosen.delete(workspaceKey);
    return had;
  }
  async storedValues(workspaceKey: string) {
    return new Map(this.values.get(workspaceKey) ?? []);
  }
  async saveValues(
    workspaceKey: string,
    set: ReadonlyArray<readonly [string, string]>,
    unset: readonly string[],
  ) {
    const values = this.values.get(workspaceKey) ?? new Map<string, string>();
    for (const key of unset) values.delete(key);
    for (const [key, value] of set) values.set(key, value);
    this.values.set(workspaceKey, values);
  }
  async candidates(workspaceKey: string) {
    const ranks = new Map<string, number>();
    (this.chains.get(workspaceKey) ?? []).forEach((id, at) => {
      if (this.inForce(id, workspaceKey)) ranks.set(id, at + 1);
    });
    const theme = await this.selected(workspaceKey);
    if (theme !== null) ranks.set(theme.pluginId, 0);
    return this.definitionsStored
      .filter((d) => d.isActive && ranks.has(d.pluginId))
      .map((d) => ({ ...d, rank: ranks.get(d.pluginId) ?? 0 }))
      .sort((a, b) => a.templateKey.localeCompare(b.templateKey));
  }
  async audit(principal: Principal, action: string, plugin: { id: string }) {
    this.audits.push(`${principal.subject}: ${action} (${plugin.id})`);
  }
}

const operator = caller(["extension.read", "extension.update"]);
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let themes: MemoryThemes;
let announced: string[];
const deps = () => ({
  tenancy: memoryTenancy(workspaces),
  grants,
  themes,
  announce: (id: string) => void announced.push(id),
});

beforeEach(() => {
  themes = new MemoryThemes();
  announced = [];
  tenantGrants = { acme: ["brand", "plain", "sleepy", "shopfront", "blogkit"], zeta: ["plain"] };
});

const routes = pluginRegistryRoutes;
const choose = (workspaceKey: string, themePluginId: string, principal = operator) =>
  callRoute(routes["themes.workspace-put"], (req) => putWorkspaceTheme(deps(), req), {
    principal,
    params: { workspaceKey },
    query: {},
    body: { themePluginId },
  });
const theme = (workspaceKey: string, principal = operator) =>
  callRoute(routes["themes.workspace"], (req) => getWorkspaceTheme(deps(), req), {
    principal,
    params: { workspaceKey },
    query: {},
    body: null,
  });
const setValues = (
  workspaceKey: string,
  values: Record<string, string | number | boolean | null>,
  principal = operator,
) =>
  callRoute(routes["themes.settings-put"], (req) => putSettings(deps(), req), {
    principal,
    params: { workspaceKey },
    query: {},
    body: { values },
  });
const settings = (workspaceKey: string) =>
  callRoute(routes["themes.settings"], (req) => getSettings(deps(), req), {
    principal: operator,
    params: { workspaceKey },
    query: {},
    body: null,
  });
const effective = (workspaceKey: string) =>
  callRoute(routes["themes.effective"], (req) => getEffective(deps(), req), {
    principal: operator,
    params: { workspaceKey },
    query: {},
    body: null,
  });
const putDef = (
  templateKey: string,
  pluginId: string,
  body: Record<string, unknown>,
  principal = operator,
  version = "1.0.0",
) =>
  callRoute(routes["themes.definition-put"], (req) => putDefinition(deps(), req), {
    principal,
    params: { templateKey, pluginId, version },
    query: {},
    body,
  });

/** The violations of a refused request, as `field: message`. */
async function violations(answer: Promise<unknown>): Promise<string[]> {
  const error = (await refusalOf(answer)) as SvcError & {
    violations?: ReadonlyArray<{ field: string; message: string }>;
  };
  expect(error.code).toBe(ErrorCode.ValidationFailed);
  return (error.violations ?? []).map((v) => `${v.field}: ${v.message}`);
}

describe("choosing a workspace's theme plugin", () => {
  it("shows the chosen theme with its defaults grouped in sections, audits it and nudges the followers", async () => {
    const answer = await choose("shop", "brand");
    expect(answer).toMatchObject({
      status: 200,
      body: {
        workspaceKey: "shop",
        themePluginId: "brand",
        themeVersion: "1.0.0",
        valuesByKey: { primary: "#112233", title: "Shop" },
        sectionLayouts: [
          { section: "Colours", keys: ["primary", "accent"] },
          { section: "General", keys: ["title"] },
        ],
      },
    });
    expect(themes.audits).toEqual(["op: theme shop (brand)"]);
    expect(announced).toEqual(["brand"]);
  });

  it("refuses a plugin not installed, without theme.json, not entitled or not active, and keeps what was chosen", async () => {
    await choose("news", "plain");
    themes.audits.length = 0;
    announced.length = 0;
    const field = "/body/themePluginId";
    expect(await violations(choose("news", "ghost"))).toEqual([`${field}: plugin 'ghost' is not installed`]);
    expect(await violations(choose("news", "blogkit"))).toEqual([
      `${field}: plugin 'blogkit' has no theme.json`,
    ]);
    expect(await violations(choose("news", "brand"))).toEqual([
      `${field}: workspace 'news' is not entitled to plugin 'brand'`,
    ]);
    expect(await violations(choose("shop", "sleepy"))).toEqual([
      `${field}: plugin 'sleepy' is not active: activate it before choosing it as a theme`,
    ]);
    expect(themes.chosen).toEqual(new Map([["news", "plain"]]));
    expect(themes.audits).toEqual([]);
    expect(announced).toEqual([]);
  });

  it("lets a workspace session choose only a plugin delegated to its tenant, and only for its workspace", async () => {
    expect(await violations(choose("shop", "brand", shopAdmin))).toEqual([
      "/body/themePluginId: plugin 'brand' is not delegated to tenant 'acme'",
    ]);
    themes.delegations.add("acme/brand");
    expect((await choose("shop", "brand", shopAdmin)).status).toBe(200);
    await expect(choose("news", "plain", shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(theme("news", shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(themes.chosen).toEqual(new Map([["shop", "brand"]]));
  });

  it("answers 404 for a workspace the resolver does not know", async () => {
    await expect(choose("ghost", "brand")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(themes.chosen.size).toBe(0);
  });

  it("stops showing a theme whose grant is withdrawn, and shows it again when the grant comes back", async () => {
    await choose("shop", "brand");
    tenantGrants.acme = ["plain"];
    expect((await theme("shop")).body).toEqual({
      workspaceKey: "shop",
      themePluginId: null,
      themeVersion: null,
      valuesByKey: {},
      sectionLayouts: [],
    });
    tenantGrants.acme = ["brand"];
    expect((await theme("shop")).body).toMatchObject({ themePluginId: "brand" });
  });

  it("removes the choice (204) and answers 404 when there is none", async () => {
    const remove = () =>
      callRoute(routes["themes.workspace-delete"], (req) => deleteWorkspaceTheme(deps(), req), {
        principal: operator,
        params: { workspaceKey: "shop" },
        query: {},
        body: null,
      });
    await choose("shop", "brand");
    announced.length = 0;
    expect((await remove()).status).toBe(204);
    expect(announced).toEqual(["brand"]);
    await expect(remove()).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});

describe("a workspace's theme settings", () => {
  it("refuses every value that does not fit its field at once, and stores none of them", async () => {
    await choose("shop", "brand");
    expect(
      await violations(setValues("shop", { primary: "blue", nope: "x", title: null, accent: "#abc" })),
    ).toEqual([
      "/body/values/primary: is not a colour (#rgb, #rrggbb or #rrggbbaa)",
      "/body/values/nope: the theme has no setting 'nope'",
    ]);
    expect(themes.values.get("shop")).toBeUndefined();
  });

  it("stores fitting values, and null takes a value back to its default", async () => {
    await choose("shop", "brand");
    announced.length = 0;
    expect(
      (await setValues("shop", { primary: "#000000", accent: "#abc", title: "Acme" })).body,
    ).toMatchObject({
      themePluginId: "brand",
      valuesByKey: { primary: "#000000", accent: "#abc", title: "Acme" },
    });
    expect((await setValues("shop", { primary: null, accent: null })).body).toMatchObject({
      valuesByKey: { primary: "#112233", title: "Acme" },
    });
    expect([...(themes.values.get("shop") ?? [])]).toEqual([["title", "Acme"]]);
    expect(announced).toEqual(["brand", "brand"]);
  });

  it("refuses a required field without a default being cleared", async () => {
    const required: Theme = { ...brandTheme, fields: [field("title", "text", { required: true })] };
    const was = plugins.brand;
    plugins.brand = { tier: "application", active: true, theme: required };
    try {
      await choose("shop", "brand");
      expect(await violations(setValues("shop", { title: null }))).toEqual([
        "/body/values/title: is required",
      ]);
    } finally {
      plugins.brand = was ?? plugins.plain!;
    }
  });

  it("answers 404 while the workspace has no theme", async () => {
    await expect(setValues("shop", { primary: "#000" })).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });

  it("keeps values across a theme change but shows only those that fit the new theme's fields", async () => {
    await choose("shop", "brand");
    await setValues("shop", { primary: "#000000" });
    await choose("shop", "plain");
    // "#000000" is no option of plain's select: its default is shown, the stored value is kept.
    expect((await settings("shop")).body).toMatchObject({
      themePluginId: "plain",
      fields: [{ key: "primary", type: "select", options: ["light", "dark"] }],
      valuesByKey: { primary: "light" },
    });
    expect(themes.values.get("shop")?.get("primary")).toBe("#000000");
    await choose("shop", "brand");
    expect((await theme("shop")).body).toMatchObject({ valuesByKey: { primary: "#000000" } });
  });
});

describe("template definitions", () => {
  it("registers a definition of an installed version with defaults (201), then changes only what is given (200)", async () => {
    const first = await putDef("home", "shopfront", { priority: 7 });
    expect(first).toMatchObject({
      status: 201,
      body: {
        templateKey: "home",
        displayName: "home",
        templatePath: "views/surface/home.html",
        parentTemplateKey: null,
        isActive: true,
        priority: 7,
        source: "api",
      },
    });
    const second = await putDef("home", "shopfront", { displayName: "Home page", parentTemplateKey: "base" });
    expect(second).toMatchObject({
      status: 200,
      body: { displayName: "Home page", parentTemplateKey: "base", priority: 7 },
    });
    expect(themes.audits).toEqual([
      "op: theme definition home (shopfront)",
      "op: theme definition home (shopfront)",
    ]);
    expect(announced).toEqual(["shopfront", "shopfront"]);
  });

  it("answers 404 for a version not installed and refuses a workspace session by the contract", async () => {
    await expect(putDef("home", "shopfront", {}, operator, "9.9.9")).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(putDef("home", "shopfront", {}, shopAdmin)).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
    });
    expect(themes.definitionsStored).toEqual([]);
  });

  it("switches a definition off, and answers 404 for one that does not exist", async () => {
    const activation = (templateKey: string) =>
      callRoute(routes["themes.definition-activation"], (req) => activateDefinition(deps(), req), {
        principal: operator,
        params: { templateKey, pluginId: "shopfront", version: "1.0.0" },
        query: {},
        body: { isActive: false },
      });
    await putDef("home", "shopfront", {});
    expect((await activation("home")).body).toMatchObject({ templateKey: "home", isActive: false });
    await expect(activation("ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});

describe("a workspace's effective templates", () => {
  beforeEach(async () => {
    await choose("shop", "brand");
    themes.chains.set("shop", ["shopfront", "blogkit"]);
  });

  it("takes per key the highest priority, then the theme plugin, then chain order, skipping what is off", async () => {
    themes.definitionsStored = [
      definition("home", "blogkit", { priority: 200 }),
      definition("home", "shopfront", { priority: 200 }),
      definition("home", "brand", { priority: 100 }),
      definition("page", "brand", { priority: 50 }),
      definition("page", "shopfront", { priority: 50 }),
      definition("post", "blogkit", { priority: 900, isActive: false }),
      definition("post", "shopfront", { priority: 1 }),
      definition("cart", "plain", { priority: 999 }),
    ];
    const answer = (await effective("shop")).body;
    expect(answer?.themePluginId).toBe("brand");
    expect(answer?.templates.map((t) => `${t.templateKey}: ${t.pluginId}`)).toEqual([
      "home: shopfront",
      "page: brand",
      "post: shopfront",
    ]);
  });

  it("lists the keys each template inherits from, stopping at a loop", async () => {
    themes.definitionsStored = [
      definition("a", "brand", { parentTemplateKey: "b" }),
      definition("b", "shopfront", { parentTemplateKey: "c" }),
      definition("c", "blogkit", { parentTemplateKey: "a" }),
      definition("d", "brand", { parentTemplateKey: "missing" }),
    ];
    const inheritance = (await effective("shop")).body?.templates.map((t) => t.inheritance);
    expect(inheritance).toEqual([
      ["a", "b", "c"],
      ["b", "c", "a"],
      ["c", "a", "b"],
      ["d", "missing"],
    ]);
  });

  it("serves a workspace session its own workspace's only, and a platform session the one it names or `default`", async () => {
    themes.definitionsStored = [definition("home", "brand")];
    const current = (principal: Principal, workspaceKey?: string) =>
      callRoute(routes["themes.effective-current"], (req) => getEffectiveCurrent(deps(), req), {
        principal,
        params: {},
        query: workspaceKey === undefined ? {} : { workspaceKey },
        body: null,
      });
    expect((await current(shopAdmin)).body).toMatchObject({ workspaceKey: "shop", themePluginId: "brand" });
    // Naming another workspace is refused by the contract's reach, as for every workspace-scoped route.
    await expect(current(shopAdmin, "news")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect((await current(operator)).body).toMatchObject({ workspaceKey: "default", themePluginId: null });
    expect((await current(operator, "shop")).body?.templates).toHaveLength(1);
    await expect(current(operator, "ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});
