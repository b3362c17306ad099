/**
 * Entitlement questions through their contracts, with the grants and the resolver's tenancy in memory: no
 * NATS, no PostgreSQL. A system plugin is entitled everywhere; otherwise a grant to the workspace comes
 * before one to its tenant; an expired grant is no grant (the table answers only grants in force).
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  type DelegationRow,
  type EntitlementTables,
  type GrantRecord,
  type GrantRow,
  type GrantTable,
  listDelegations,
  listEntitlements,
  putDelegation,
  putEntitlements,
  syncEntitlements,
  tenantEntitlement,
  workspaceEntitlement,
} from "./entitlements.js";
import { memoryTenancy } from "./memory-tenancy.js";

interface Grant {
  readonly pluginId: string;
  readonly subjectType: "tenant" | "workspace";
  readonly subjectKey: string;
  readonly expiresAt: Date | null;
}

const now = Date.now();
const later = new Date(now + 86_400_000);

class MemoryGrants implements GrantTable {
  constructor(
    private readonly tiers: Readonly<Record<string, string>>,
    private readonly grants: readonly Grant[],
  ) {}

  async tier(pluginId: string) {
    return this.tiers[pluginId] ?? null;
  }

  async grantsInForce(pluginId: string, tenantKey: string, workspaceKey: string | null) {
    return this.grants
      .filter((g) => g.pluginId === pluginId && (g.expiresAt === null || g.expiresAt.getTime() > Date.now()))
      .filter((g) =>
        g.subjectType === "tenant" ? g.subjectKey === tenantKey : g.subjectKey === workspaceKey,
      )
      .map((g) => ({ subjectType: g.subjectType, expiresAt: g.expiresAt }));
  }
}

const workspaces: Record<string, string> = { shop: "acme", blog: "acme", news: "zeta" };
const tenancy = memoryTenancy(workspaces);

const deps = {
  tenancy,
  grants: new MemoryGrants({ "audit-log": "system", shopfront: "application", blogkit: "application" }, [
    { pluginId: "shopfront", subjectType: "tenant", subjectKey: "acme", expiresAt: null },
    { pluginId: "shopfront", subjectType: "workspace", subjectKey: "shop", expiresAt: later },
    { pluginId: "blogkit", subjectType: "workspace", subjectKey: "blog", expiresAt: new Date(now - 1_000) },
  ]),
};

const operator = caller(["plugin.read"]);

const forWorkspace = (workspaceKey: string, pluginId: string, principal = operator) =>
  callRoute(pluginRegistryRoutes["entitlements.workspace"], (req) => workspaceEntitlement(deps, req), {
    principal,
    params: { workspaceKey, pluginId },
    query: {},
    body: null,
  });

describe("GET /api/workspaces/:workspaceKey/entitlements/:pluginId", () => {
  it("entitles a system plugin everywhere", async () => {
    expect((await forWorkspace("news", "audit-log")).body).toMatchObject({ entitled: true, via: "system" });
  });

  it("takes a grant to the workspace before one to its tenant, and says until when", async () => {
    expect((await forWorkspace("shop", "shopfront")).body).toEqual({
      workspaceKey: "shop",
      tenantKey: "acme",
      pluginId: "shopfront",
      entitled: true,
      via: "workspace",
      expiresAtUtc: later.toISOString(),
    });
    expect((await forWorkspace("blog", "shopfront")).body).toMatchObject({
      via: "tenant",
      expiresAtUtc: null,
    });
  });

  it("counts an expired grant for nothing, and another tenant's grant neither", async () => {
    expect((await forWorkspace("blog", "blogkit")).body).toMatchObject({ entitled: false, via: null });
    expect((await forWorkspace("news", "shopfront")).body).toMatchObject({ entitled: false, via: null });
  });

  it("answers 404 for a workspace the resolver does not know, and for another workspace's session", async () => {
    await expect(forWorkspace("ghost", "shopfront")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    const shopAdmin: Principal = { ...operator, scope: "workspace", workspaceKey: "shop" };
    expect((await forWorkspace("shop", "shopfront", shopAdmin)).body).toMatchObject({ entitled: true });
    await expect(forWorkspace("blog", "shopfront", shopAdmin)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
  });
});

describe("GET /api/tenants/:tenantId/entitlements/:pluginId", () => {
  const forTenant = (tenantId: string, pluginId: string) =>
    callRoute(pluginRegistryRoutes["entitlements.tenant"], (req) => tenantEntitlement(deps, req), {
      principal: operator,
      params: { tenantId, pluginId },
      query: {},
      body: null,
    });

  it("answers by the tenant's own grants only, and 404 for an unknown tenant", async () => {
    expect((await forTenant("acme", "shopfront")).body).toMatchObject({ entitled: true, via: "tenant" });
    expect((await forTenant("acme", "blogkit")).body).toMatchObject({ entitled: false });
    await expect(forTenant("nobody", "shopfront")).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});

/** The grant and delegation tables in memory, answering as the SQL does. */
class MemoryEntitlements implements EntitlementTables {
  readonly grants = new Map<string, GrantRow>();
  readonly delegated = new Map<string, DelegationRow>();
  readonly installed = new Set(["shopfront", "blogkit"]);
  writes = 0;
  lastFilter: Record<string, string> | undefined;

  private static id(g: { type: string; key: string; pluginId: string }) {
    return `${g.type}/${g.key}/${g.pluginId}`;
  }

  async page(filter: Record<string, string>, page: { limit: number; after: string[] | null }) {
    this.lastFilter = filter;
    return [...this.grants.values()]
      .filter((g) => filter.source === undefined || g.source === filter.source)
      .filter((g) => filter.pluginId === undefined || g.plugin_id === filter.pluginId)
      .filter(
        (g) =>
          filter.tenantKey === undefined ||
          (g.subject_type === "tenant" && g.subject_key === filter.tenantKey),
      )
      .filter(
        (g) =>
          filter.workspaceKey === undefined ||
          (g.subject_type === "workspace" && g.subject_key === filter.workspaceKey),
      )
      .sort((a, b) => (MemoryEntitlements.key(a) < MemoryEntitlements.key(b) ? -1 : 1))
      .filter((g) => page.after === null || MemoryEntitlements.key(g) > page.after.join("/"))
      .slice(0, page.limit + 1);
  }

  private static key(g: GrantRow) {
    return `${g.subject_type}/${g.subject_key}/${g.plugin_id}`;
  }

  private put(g: GrantRecord, source: string, by: string) {
    this.grants.set(MemoryEntitlements.id(g), {
      subject_type: g.type,
      subject_key: g.key,
      plugin_id: g.pluginId,
      source,
      expires_at: g.expiresAt === null ? null : new Date(g.expiresAt),
      granted_by: by,
      granted_at: new Date(),
    });
  }

  async change(grant: readonly GrantRecord[], withdraw: readonly GrantRecord[], by: string) {
    this.writes++;
    for (const g of grant) this.put(g, "manual", by);
    return withdraw.filter((g) => this.grants.delete(MemoryEntitlements.id(g))).length;
  }

  async sync(source: string, grants: readonly GrantRecord[], by: string) {
    this.writes++;
    const wanted = new Set(grants.map((g) => MemoryEntitlements.id(g)));
    const mine = [...this.grants].filter(([, g]) => g.source === source);
    const gone = mine.filter(([id]) => !wanted.has(id));
    for (const [id] of gone) this.grants.delete(id);
    let added = 0;
    for (const g of grants) {
      const existing = this.grants.get(MemoryEntitlements.id(g));
      if (existing === undefined) {
        this.put(g, source, by);
        added++;
      } else if (existing.source === source) {
        existing.expires_at = g.expiresAt === null ? null : new Date(g.expiresAt);
      }
    }
    return { added, removed: gone.length, kept: mine.length - gone.length };
  }

  async delegations(tenantKey: string) {
    return [...this.delegated.values()].filter((d) => d.tenant_key === tenantKey);
  }

  async delegate(tenantKey: string, pluginId: string, by: string) {
    if (!this.installed.has(pluginId)) return null;
    const row = { tenant_key: tenantKey, plugin_id: pluginId, delegated_by: by, delegated_at: new Date() };
    this.delegated.set(`${tenantKey}/${pluginId}`, row);
    return row;
  }

  async undelegate(tenantKey: string, pluginId: string) {
    this.delegated.delete(`${tenantKey}/${pluginId}`);
  }
}

describe("granting, syncing and delegating", () => {
  let tables: MemoryEntitlements;
  let announced: number;
  const admin = () => ({ tenancy, entitlements: tables, announce: () => void announced++ });
  const executor: Principal = {
    ...operator,
    permissions: ["plugin.read", "plugin.execute", "plugin.assign"],
  };
  beforeEach(() => {
    tables = new MemoryEntitlements();
    announced = 0;
  });
  const call = {
    put: (items: unknown[]) =>
      callRoute(pluginRegistryRoutes["entitlements.put"], (req) => putEntitlements(admin(), req), {
        principal: executor,
        params: {},
        query: {},
        body: { items },
      } as never),
    sync: (source: string, items: unknown[]) =>
      callRoute(pluginRegistryRoutes["entitlements.sync"], (req) => syncEntitlements(admin(), req), {
        principal: executor,
        params: {},
        query: {},
        body: { source, items },
      } as never),
    list: (query: Record<string, unknown> = {}) =>
      callRoute(pluginRegistryRoutes["entitlements.list"], (req) => listEntitlements(admin(), req), {
        principal: executor,
        params: {},
        query,
        body: null,
      }),
    delegate: (tenantKey: string, pluginId: string, delegated: boolean) =>
      callRoute(pluginRegistryRoutes["delegations.put"], (req) => putDelegation(admin(), req), {
        principal: executor,
        params: { tenantKey, pluginId },
        query: {},
        body: { delegated },
      }),
    delegations: (tenantKey: string) =>
      callRoute(pluginRegistryRoutes["delegations.list"], (req) => listDelegations(admin(), req), {
        principal: executor,
        params: { tenantKey },
        query: {},
        body: null,
      }),
  };

  it("grants and withdraws in one change, by the operator, and tells the services", async () => {
    const made = await call.put([
      { tenantKey: "acme", pluginId: "shopfront", entitled: true },
      { workspaceKey: "news", pluginId: "blogkit", entitled: true, expiresAtUtc: "2027-01-01T00:00:00Z" },
    ]);
    expect(made.body).toEqual({ granted: 2, withdrawn: 0 });
    expect(tables.grants.get("tenant/acme/shopfront")).toMatchObject({ source: "manual", granted_by: "op" });
    const changed = await call.put([
      { tenantKey: "acme", pluginId: "shopfront", entitled: false },
      { tenantKey: "zeta", pluginId: "shopfront", entitled: false },
    ]);
    expect(changed.body).toEqual({ granted: 0, withdrawn: 1 });
    expect(announced).toBe(2);
    const listed = await call.list({ pluginId: "blogkit" });
    expect(listed.body?.items).toEqual([
      expect.objectContaining({
        tenantKey: null,
        workspaceKey: "news",
        pluginId: "blogkit",
        source: "manual",
        expiresAtUtc: "2027-01-01T00:00:00.000Z",
      }),
    ]);
    expect(tables.lastFilter).toEqual({ pluginId: "blogkit" });
  });

  it("refuses, writing nothing, an item naming both or neither subject and one naming a subject that does not exist", async () => {
    for (const items of [
      [{ tenantKey: "acme", workspaceKey: "shop", pluginId: "shopfront", entitled: true }],
      [{ pluginId: "shopfront", entitled: true }],
    ]) {
      await expect(call.put(items)).rejects.toMatchObject({
        code: ErrorCode.ValidationFailed,
        violations: [{ field: "/body/items/0", message: "names exactly one of tenantKey and workspaceKey" }],
      });
    }
    await expect(
      call.put([
        { tenantKey: "acme", pluginId: "shopfront", entitled: true },
        { workspaceKey: "ghost", pluginId: "shopfront", entitled: true },
        { tenantKey: "nobody", pluginId: "shopfront", entitled: false },
      ]),
    ).rejects.toMatchObject({
      violations: [
        { field: "/body/items/1/workspaceKey", message: "workspace 'ghost' does not exist" },
        { field: "/body/items/2/tenantKey", message: "tenant 'nobody' does not exist" },
      ],
    });
    expect(tables.writes).toBe(0);
    expect(announced).toBe(0);
  });

  it("makes a sync the whole of its source's grants, leaving the operator's and other sources' alone", async () => {
    await call.put([{ tenantKey: "acme", pluginId: "blogkit", entitled: true }]);
    const first = await call.sync("billing", [
      { tenantKey: "acme", pluginId: "shopfront" },
      { tenantKey: "acme", pluginId: "blogkit" },
      { workspaceKey: "news", pluginId: "shopfront" },
    ]);
    // blogkit for acme is the operator's: the sync does not take it.
    expect(first.body).toEqual({ source: "billing", added: 2, removed: 0, kept: 0 });
    expect(tables.grants.get("tenant/acme/blogkit")?.source).toBe("manual");
    const second = await call.sync("billing", [{ tenantKey: "acme", pluginId: "shopfront" }]);
    expect(second.body).toEqual({ source: "billing", added: 0, removed: 1, kept: 1 });
    const emptied = await call.sync("billing", []);
    expect(emptied.body).toEqual({ source: "billing", added: 0, removed: 1, kept: 0 });
    expect([...tables.grants.keys()]).toEqual(["tenant/acme/blogkit"]);
    await expect(call.sync("manual", [])).rejects.toMatchObject({
      violations: [expect.objectContaining({ field: "/body/source" })],
    });
    expect(tables.writes).toBe(4);
  });

  it("delegates an installed plugin to a tenant that exists, and takes it back", async () => {
    const made = await call.delegate("acme", "shopfront", true);
    expect(made.body).toMatchObject({
      tenantKey: "acme",
      pluginId: "shopfront",
      delegated: true,
      delegatedBy: "op",
    });
    expect((await call.delegations("acme")).body?.items.map((d) => d.pluginId)).toEqual(["shopfront"]);
    await expect(call.delegate("acme", "not-installed", true)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(call.delegate("nobody", "shopfront", true)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(call.delegations("nobody")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect((await call.delegate("acme", "shopfront", false)).body).toEqual({
      tenantKey: "acme",
      pluginId: "shopfront",
      delegated: false,
      delegatedBy: null,
      delegatedAtUtc: null,
    });
    expect((await call.delegations("acme")).body?.items).toEqual([]);
  });
});
