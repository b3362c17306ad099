/**
 * Entitlement questions through their contracts, with the grants and the resolver's tenancy in memory: no
 * NATS, no PostgreSQL. A system plugin is entitled everywhere; otherwise a grant to the workspace comes
 * before one to its tenant; an expired grant is no grant (the table answers only grants in force).
 */
import type { Principal } from "@svc/bus";
import { callRoute, pluginRegistryRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import { type GrantTable, tenantEntitlement, workspaceEntitlement } from "./entitlements.js";
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

const operator: Principal = {
  subject: "op",
  scope: "platform",
  workspaceKey: null,
  permissions: ["plugin.read"],
  roles: ["operator"],
};

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
