/**
 * Whether an installed plugin can run on this host: its contract within the major version the host
 * supports, and the host's version within the range the plugin asks for (pre-releases included), with
 * each reason it cannot. And the lifecycle audit through its contract, with the tables in memory: a
 * workspace session sees only the entries about its own workspace.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes } from "@svc/contracts";
import { HOST_DEPENDENCY, PLUGIN_CONTRACT } from "@svc/plugin-package";
import { describe, expect, it } from "vitest";

import type { PluginRow } from "./common.js";
import {
  auditLog,
  type AuditRow,
  compatibilityOf,
  contractCompatibility,
  contributions,
  type ReportTables,
} from "./reports.js";

const major = Number(PLUGIN_CONTRACT.current.split(".")[0]);
const plugin = (contractVersion: string, host?: string) => ({
  plugin_id: "shop",
  version: "1.2.0",
  contract_version: contractVersion,
  registry: {
    contractVersion,
    schemaVersion: "1",
    name: "shop",
    pluginId: "shop",
    version: "1.2.0",
    assemblyFileName: "index.mjs",
    entryTypeName: "default",
    ...(host === undefined ? {} : { dependencies: { [HOST_DEPENDENCY]: host } }),
  },
});

describe("contract compatibility", () => {
  it("accepts a contract of the supported major version and a host range this host is in", () => {
    expect(compatibilityOf(plugin(`${major}.0`, `^2.0.0`), "2.3.1")).toEqual({
      pluginId: "shop",
      version: "1.2.0",
      contractVersion: `${major}.0`,
      compatible: true,
      reasons: [],
    });
    // A pre-release host is inside a range that covers its version.
    expect(compatibilityOf(plugin(`${major}.1`, ">=2.0.0"), "2.4.0-rc.1").compatible).toBe(true);
  });

  it("names each reason a plugin cannot run: another contract major, a host outside its range", () => {
    expect(compatibilityOf(plugin(`${major + 1}.0`, "^3.0.0"), "2.3.1").reasons).toEqual([
      `contract ${major + 1}.0 is outside ${PLUGIN_CONTRACT.supported}`,
      "needs host ^3.0.0; this host is 2.3.1",
    ]);
    expect(compatibilityOf(plugin("not-a-version"), "2.3.1")).toMatchObject({ compatible: false });
  });
});

/** The registry's tables in memory: installed plugins, and audit entries each about a workspace or none. */
class MemoryReports implements ReportTables {
  readonly entries: Array<AuditRow & { workspace_key: string | null }> = [];
  constructor(
    private readonly installed: PluginRow[] = [],
    /** The workspaces whose chain holds each plugin while it is entitled there. */
    readonly chains = new Map<string, string[]>(),
  ) {}

  async entitledChains() {
    return this.chains;
  }

  add(action: string, pluginId: string | null, workspaceKey: string | null) {
    this.entries.push({
      id: String(this.entries.length + 1),
      at: new Date(Date.UTC(2026, 10, 27, 10, 0, this.entries.length)),
      actor: "op",
      actor_name: "Operator",
      action,
      plugin_id: pluginId,
      version: pluginId === null ? null : "1.0.0",
      outcome: "succeeded",
      reason: null,
      workspace_key: workspaceKey,
    });
  }

  async plugins() {
    return this.installed;
  }

  async audit(
    workspaceKey: string | null,
    pluginId: string | undefined,
    page: { limit: number; after: string[] | null },
  ) {
    return this.entries
      .filter((e) => workspaceKey === null || e.workspace_key === workspaceKey)
      .filter((e) => pluginId === undefined || e.plugin_id === pluginId)
      .filter((e) => page.after === null || Number(e.id) < Number(page.after[0]))
      .sort((a, b) => Number(b.id) - Number(a.id))
      .slice(0, page.limit + 1);
  }
}

const operator = caller(["plugin.read"]);
const shopAdmin: Principal = {
  ...operator,
  subject: "admin",
  scope: "workspace",
  workspaceKey: "shop",
  roles: ["admin"],
};

describe("the lifecycle audit", () => {
  const reports = new MemoryReports();
  reports.add("install", "crm", null);
  reports.add("assign", "crm", "shop");
  reports.add("assign", "crm", "blog");
  reports.add("theme", "look", "shop");
  const audit = (principal: Principal, query: Record<string, unknown> = {}) =>
    callRoute(pluginRegistryRoutes["plugins.audit"], (req) => auditLog({ reports }, req), {
      principal,
      params: {},
      query,
      body: null,
    });

  it("shows a platform session every entry newest first, paged, and filtered by plugin", async () => {
    const first = await audit(operator, { limit: 3 });
    expect(first.body?.items.map((e) => e.id)).toEqual(["4", "3", "2"]);
    expect(first.body?.items[0]).toMatchObject({ action: "theme", pluginId: "look", actorName: "Operator" });
    const next = await audit(operator, { limit: 3, cursor: first.body?.nextCursor });
    expect(next.body?.items.map((e) => e.id)).toEqual(["1"]);
    expect((await audit(operator, { pluginId: "crm" })).body?.items.map((e) => e.id)).toEqual([
      "3",
      "2",
      "1",
    ]);
  });

  it("shows a workspace session only the entries about its own workspace", async () => {
    expect((await audit(shopAdmin)).body?.items.map((e) => e.id)).toEqual(["4", "2"]);
    expect((await audit(shopAdmin, { pluginId: "crm" })).body?.items.map((e) => e.id)).toEqual(["2"]);
  });
});

describe("GET /api/plugins/contracts/compatibility", () => {
  it("judges every installed plugin against this host", async () => {
    const rows = [
      { ...plugin(`${major}.0.0`), plugin_id: "ok" },
      { ...plugin(`${major + 1}.0.0`), plugin_id: "newer" },
      { ...plugin(`${major}.0.0`, ">=99.0.0"), plugin_id: "later-host" },
    ] as unknown as PluginRow[];
    const reply = await callRoute(
      pluginRegistryRoutes["contracts.compatibility"],
      (req) => contractCompatibility({ reports: new MemoryReports(rows), hostVersion: "1.4.0" }, req),
      { principal: operator, params: {}, query: {}, body: null },
    );
    expect(reply.body?.map((p) => [p.pluginId, p.compatible, p.reasons.length])).toEqual([
      ["ok", true, 0],
      ["newer", false, 1],
      ["later-host", false, 1],
    ]);
  });
});

describe("what the registry tells the other services (contributions.list)", () => {
  it("gives each plugin its keys, events with their schemas, routes, custom fields and entitled chains", async () => {
    const row = {
      ...plugin(PLUGIN_CONTRACT.current),
      name: "shop",
      tier: "application",
      package_sha256: "ab".repeat(32),
      signed: true,
      signer_fingerprint: null,
      publisher_id: null,
      theme: null,
      state: "active",
      failure_reason: null,
      refused_reason: null,
      installed_at: new Date(0),
      updated_at: new Date(0),
    } as PluginRow;
    row.registry = {
      ...row.registry,
      events: ["shop.order-placed"],
      eventSchemas: {
        "shop.order-placed": { schema: { type: "object" }, example: { orderId: "o-1" } },
      },
      sensitiveFields: ["cardNumber"],
      routes: [{ method: "POST", path: "/orders", handler: "place" }],
      customFields: [{ entityName: "user", key: "tier" }],
    };
    const other = { ...row, plugin_id: "idle" };
    const reports = new MemoryReports([row, other], new Map([["shop", ["alpha", "beta"]]]));
    const { plugins } = await contributions(reports);
    expect(plugins).toHaveLength(2);
    expect(plugins[0]).toMatchObject({
      pluginId: "shop",
      state: "active",
      events: ["shop.order-placed"],
      eventSchemas: [
        {
          eventName: "shop.order-placed",
          description: null,
          schema: { type: "object" },
          example: { orderId: "o-1" },
        },
      ],
      sensitiveFields: ["cardNumber"],
      routes: [{ method: "POST", path: "/orders", permission: "", handler: "place" }],
      // A field's defaults filled in: its label is its key, its type text.
      customFields: [
        {
          entityName: "user",
          key: "tier",
          label: "tier",
          type: "text",
          required: false,
          options: [],
          description: null,
        },
      ],
      workspaces: ["alpha", "beta"],
    });
    // A plugin in no entitled chain is raised nowhere.
    expect(plugins[1]).toMatchObject({ pluginId: "idle", workspaces: [] });
  });
});
