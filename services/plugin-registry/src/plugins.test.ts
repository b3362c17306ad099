/**
 * Installing, updating and uninstalling through the contracts, with the plugin tables, the package store
 * and the opened packages in memory: no NATS, no PostgreSQL, no archive. A plugin id is installed once; an
 * update needs the same id and a version no older (unless asked); an upload nothing installed is made of
 * is deleted, whether the install failed or an update replaced it; each outcome is audited under the plugin
 * the package claims to be. (The opening itself, signatures and registry.json's rules, is tested with real
 * packages in the integration tests.)
 */
import { createHash } from "node:crypto";

import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes, refusalOf } from "@svc/contracts";
import { ErrorCode, SvcError } from "@svc/errors";
import { Registry } from "@svc/observability";
import type { ThemeDefinition } from "@svc/plugin-package";
import { beforeEach, describe, expect, it } from "vitest";

import { lifecycleMetrics, type PluginRow } from "./common.js";
import type { OpenedPackage } from "./packages.js";
import { refused } from "./packages.js";
import {
  install,
  type InstallChange,
  type InstallDeps,
  type PackageTables,
  type PluginRecord,
  uninstall,
  updateUpload,
} from "./plugins.js";

class MemoryPackages implements PackageTables {
  readonly rows = new Map<string, PluginRow>();
  readonly definitions: string[] = [];
  readonly audits: string[] = [];

  async installedVersions() {
    return new Map([...this.rows.values()].map((r) => [r.plugin_id, r.version]));
  }
  async all() {
    return [...this.rows.values()].sort((a, b) => a.plugin_id.localeCompare(b.plugin_id));
  }
  async change<T>(pluginId: string, change: (tables: InstallChange) => Promise<T>): Promise<T> {
    const existing = this.rows.get(pluginId) ?? null;
    const added: string[] = [];
    let saved: PluginRow | undefined;
    const result = await change({
      existing,
      save: async (p: PluginRecord, by: string) => {
        saved = {
          plugin_id: p.registry.pluginId,
          name: p.registry.name,
          version: p.registry.version,
          tier: p.registry.tier ?? "application",
          contract_version: p.registry.contractVersion,
          package_sha256: p.sha256,
          signed: p.signed,
          signer_fingerprint: p.signerFingerprint,
          publisher_id: p.publisherId,
          registry: p.registry,
          theme: p.theme,
          state: existing === null ? "inactive" : existing.state === "failed" ? "inactive" : existing.state,
          failure_reason: null,
          refused_reason: null,
          installed_at: existing?.installed_at ?? new Date(),
          updated_at: new Date(),
        };
        void by;
        return saved;
      },
      addDefinitions: async (id: string, version: string, defs: readonly ThemeDefinition[]) => {
        for (const d of defs) added.push(`${d.templateKey} ${id}@${version}`);
      },
    });
    // Committed only when the change returned.
    if (saved !== undefined) this.rows.set(pluginId, saved);
    this.definitions.push(...added);
    return result;
  }
  async remove(pluginId: string) {
    const gone = this.rows.get(pluginId) ?? null;
    this.rows.delete(pluginId);
    return gone;
  }
  async inUse(sha256: string) {
    return [...this.rows.values()].some((r) => r.package_sha256 === sha256);
  }
  async audit(principal: Principal, action: string, p: { id?: string; version?: string }, error?: unknown) {
    const outcome =
      error === undefined ? "succeeded" : `failed (${error instanceof SvcError ? error.code : "?"})`;
    this.audits.push(`${action} ${p.id ?? "?"}@${p.version ?? "?"}: ${outcome}`);
  }
}

/** A package as `open` would find it: the registry.json and, optionally, template definitions. */
function opened(pluginId: string, version: string, definitions: ThemeDefinition[] = []): OpenedPackage {
  return {
    registry: {
      contractVersion: "1.0",
      schemaVersion: "1",
      name: pluginId,
      pluginId,
      version,
      assemblyFileName: "index.mjs",
      entryTypeName: "default",
    },
    ...(definitions.length === 0 ? {} : { theme: { surface: "workspace", definitions, fields: [] } }),
    signed: true,
  };
}
const sha = (name: string) => createHash("sha256").update(name).digest("hex");

const operator = caller(["plugin.create", "plugin.delete"]);

let packages: MemoryPackages;
/** The uploads in the store, by hash → what opening them gives (or the refusal it throws). */
let uploads: Map<string, OpenedPackage | SvcError>;
let installedSeenByOpen: Array<ReadonlyMap<string, string>>;
let announced: string[];
let deps: InstallDeps;

beforeEach(() => {
  packages = new MemoryPackages();
  uploads = new Map();
  installedSeenByOpen = [];
  announced = [];
  deps = {
    packages,
    store: {
      put: async () => {
        throw new Error("no local or feed source in these tests");
      },
      delete: async (sha256) => void uploads.delete(sha256),
    },
    open: async (sha256, options) => {
      installedSeenByOpen.push(new Map(options.installed));
      const found = uploads.get(sha256);
      if (found === undefined)
        throw refused("package-missing", `No uploaded package has the hash ${sha256}.`);
      if (found instanceof SvcError) {
        options.claimed?.({ id: "claimed", version: "6.6.6" });
        throw found;
      }
      options.claimed?.({ id: found.registry.pluginId, version: found.registry.version });
      return found;
    },
    metrics: lifecycleMetrics(new Registry()),
    announce: (id) => void announced.push(id),
    settings: {} as InstallDeps["settings"],
    feedTimeoutMs: 1_000,
  };
});

const upload = (name: string, found: OpenedPackage | SvcError) => {
  uploads.set(sha(name), found);
  return { sha256: sha(name), size: 1_000, contentType: "application/gzip" };
};
const installUpload = (name: string) =>
  callRoute(pluginRegistryRoutes["plugins.install"], (req) => install(deps, req), {
    principal: operator,
    params: {},
    query: {},
    body: { package: { sha256: sha(name), size: 1_000, contentType: "application/gzip" } },
  });
const update = (id: string, name: string, allowDowngrade?: boolean) =>
  callRoute(pluginRegistryRoutes["plugins.update-upload"], (req) => updateUpload(deps, req), {
    principal: operator,
    params: { id },
    query: allowDowngrade === undefined ? {} : { allowDowngrade },
    body: { package: { sha256: sha(name), size: 1_000, contentType: "application/gzip" } },
  });
const remove = (id: string) =>
  callRoute(pluginRegistryRoutes["plugins.uninstall"], (req) => uninstall(deps, req), {
    principal: operator,
    params: { id },
    query: {},
    body: null,
  });

const definition = (templateKey: string): ThemeDefinition => ({
  templateKey,
  displayName: templateKey,
  templatePath: `views/surface/${templateKey}.html`,
  parentTemplateKey: null,
  surface: "workspace",
  scope: "workspace",
  isActive: true,
  priority: 100,
});

describe("installing a plugin", () => {
  it("records the package (201, with its location), its template definitions, the audit and the announcement", async () => {
    upload("shop-1", opened("shop", "1.0.0", [definition("home"), definition("page")]));
    const answer = await installUpload("shop-1");
    expect(answer).toMatchObject({
      status: 201,
      headers: { location: "/api/plugins/shop" },
      body: { pluginId: "shop", version: "1.0.0", packageSha256: sha("shop-1"), state: "inactive" },
    });
    expect(packages.definitions).toEqual(["home shop@1.0.0", "page shop@1.0.0"]);
    expect(packages.audits).toEqual(["install shop@1.0.0: succeeded"]);
    expect(announced).toEqual(["shop"]);
    expect(uploads.has(sha("shop-1"))).toBe(true);
  });

  it("refuses (409) a plugin id installed already, and deletes the new upload", async () => {
    upload("shop-1", opened("shop", "1.0.0"));
    await installUpload("shop-1");
    upload("shop-2", opened("shop", "2.0.0"));
    expect((await refusalOf(installUpload("shop-2"))).code).toBe(ErrorCode.Conflict);
    expect(packages.rows.get("shop")?.version).toBe("1.0.0");
    expect(uploads.has(sha("shop-2"))).toBe(false);
    expect(uploads.has(sha("shop-1"))).toBe(true);
    expect(packages.audits.at(-1)).toBe(`install shop@2.0.0: failed (${ErrorCode.Conflict})`);
  });

  it("audits a refused package under the plugin it claims to be, records nothing and deletes the upload", async () => {
    upload("bad", refused("signature", "the signature does not match"));
    const error = await refusalOf(installUpload("bad"));
    expect(error.code).toBe(ErrorCode.PluginRefused);
    expect(packages.rows.size).toBe(0);
    expect(uploads.size).toBe(0);
    expect(packages.audits).toEqual([`install claimed@6.6.6: failed (${ErrorCode.PluginRefused})`]);
    expect(announced).toEqual([]);
  });
});

describe("updating a plugin", () => {
  beforeEach(async () => {
    upload("shop-1", opened("shop", "1.5.0"));
    await installUpload("shop-1");
    upload("blog-1", opened("blog", "1.0.0"));
    await installUpload("blog-1");
    announced.length = 0;
  });

  it("replaces the version, keeps the state, deletes the package it replaced, and checks dependencies without itself", async () => {
    packages.rows.set("shop", { ...packages.rows.get("shop")!, state: "active" });
    upload("shop-2", opened("shop", "2.0.0"));
    const answer = await update("shop", "shop-2");
    expect(answer).toMatchObject({ status: 200, body: { version: "2.0.0", state: "active" } });
    expect(uploads.has(sha("shop-1"))).toBe(false);
    expect(uploads.has(sha("shop-2"))).toBe(true);
    expect(installedSeenByOpen.at(-1)).toEqual(new Map([["blog", "1.0.0"]]));
    expect(announced).toEqual(["shop"]);
  });

  it("brings a failed plugin back as inactive", async () => {
    packages.rows.set("shop", { ...packages.rows.get("shop")!, state: "failed", failure_reason: "crashed" });
    upload("shop-2", opened("shop", "2.0.0"));
    expect((await update("shop", "shop-2")).body).toMatchObject({ state: "inactive", failureReason: null });
  });

  it("refuses an older version (409) unless asked, then goes back", async () => {
    upload("shop-0", opened("shop", "1.0.0"));
    const error = await refusalOf(update("shop", "shop-0"));
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(error.message).toContain("allowDowngrade=true");
    expect(packages.rows.get("shop")?.version).toBe("1.5.0");
    upload("shop-0", opened("shop", "1.0.0"));
    expect((await update("shop", "shop-0", true)).body).toMatchObject({ version: "1.0.0" });
  });

  it("refuses a package of another plugin (422) and a plugin not installed (404)", async () => {
    upload("blog-2", opened("blog", "2.0.0"));
    const mismatch = await refusalOf(update("shop", "blog-2"));
    expect(mismatch.extensions.reason).toBe("plugin-id-mismatch");
    expect(packages.audits.at(-1)).toBe(`update blog@2.0.0: failed (${ErrorCode.PluginRefused})`);
    upload("news-1", opened("news", "1.0.0"));
    expect((await refusalOf(update("news", "news-1"))).code).toBe(ErrorCode.NotFound);
    expect(packages.rows.get("blog")?.version).toBe("1.0.0");
    expect(uploads.has(sha("blog-2"))).toBe(false);
  });

  it("answers the same package again with what is installed, deleting nothing", async () => {
    expect(await update("shop", "shop-1")).toMatchObject({ status: 200, body: { version: "1.5.0" } });
    expect(uploads.has(sha("shop-1"))).toBe(true);
  });
});

describe("uninstalling a plugin", () => {
  it("removes it (204) and its package unless another installed plugin is the same package", async () => {
    upload("shop-1", opened("shop", "1.0.0"));
    await installUpload("shop-1");
    // A second plugin id made of the same upload, as a fixture only the tables can hold.
    packages.rows.set("copy", { ...packages.rows.get("shop")!, plugin_id: "copy" });
    expect((await remove("shop")).status).toBe(204);
    expect(uploads.has(sha("shop-1"))).toBe(true);
    expect((await remove("copy")).status).toBe(204);
    expect(uploads.has(sha("shop-1"))).toBe(false);
    expect((await refusalOf(remove("shop"))).code).toBe(ErrorCode.NotFound);
    expect(packages.audits.slice(-3)).toEqual([
      "uninstall shop@1.0.0: succeeded",
      "uninstall copy@1.0.0: succeeded",
      `uninstall shop@?: failed (${ErrorCode.NotFound})`,
    ]);
  });
});
