/**
 * A workspace's plugin chain through its contracts, with the chain tables, the grants and the resolver's
 * tenancy in memory: no NATS, no PostgreSQL. Only installed plugins the workspace is entitled to join a
 * chain; a workspace session keeps the platform's undelegated entries where they are and adds only
 * delegated plugins; a refused chain changes nothing.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes, refusalOf } from "@svc/contracts";
import { ErrorCode, type SvcError } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import { type ChainChange, type ChainEntry, type ChainTables, getChain, putChain } from "./assignments.js";
import type { GrantTable } from "./entitlements.js";
import { memoryTenancy } from "./memory-tenancy.js";

/** Installed plugins by id: tier and state. */
const plugins: Record<string, { tier: string; state: string }> = {
  "audit-log": { tier: "system", state: "active" },
  shopfront: { tier: "application", state: "active" },
  blogkit: { tier: "application", state: "inactive" },
  analytics: { tier: "application", state: "active" },
};
/** Grants to tenants (the memory has no expiry: entitlements.test.ts covers that). */
const tenantGrants: Record<string, readonly string[]> = {
  acme: ["shopfront", "blogkit", "analytics"],
  zeta: ["blogkit"],
};
const workspaces: Record<string, string> = { shop: "acme", news: "zeta" };

const grants: GrantTable = {
  tier: async (pluginId) => plugins[pluginId]?.tier ?? null,
  grantsInForce: async (pluginId, tenantKey) =>
    (tenantGrants[tenantKey] ?? []).includes(pluginId) ? [{ subjectType: "tenant", expiresAt: null }] : [],
};

class MemoryChains implements ChainTables {
  readonly stored = new Map<string, { ids: string[]; tenantKey: string; at: Date }>();
  readonly audits: string[] = [];
  /** Delegations: `tenant/plugin`. */
  readonly delegations = new Set<string>();

  async chain(workspaceKey: string): Promise<ChainEntry[]> {
    const found = this.stored.get(workspaceKey);
    return (found?.ids ?? []).map((id) => ({
      pluginId: id,
      version: "1.0.0",
      state: plugins[id]?.state ?? "inactive",
      tenantKey: found?.tenantKey ?? null,
      entitled: plugins[id]?.tier === "system" || (tenantGrants[found?.tenantKey ?? ""] ?? []).includes(id),
      assignedAt: found?.at ?? new Date(0),
    }));
  }

  async change<T>(workspaceKey: string, change: (tables: ChainChange) => Promise<T>): Promise<T> {
    return change({
      installed: async (ids) => new Set(ids.filter((id) => id in plugins)),
      current: async () => [...(this.stored.get(workspaceKey)?.ids ?? [])],
      delegated: async (tenantKey, pluginId) => this.delegations.has(`${tenantKey}/${pluginId}`),
      grants,
      replace: async (ids, tenantKey) => {
        this.stored.set(workspaceKey, { ids: [...ids], tenantKey, at: new Date() });
      },
    });
  }

  async audit(principal: Principal, action: string) {
    this.audits.push(`${principal.subject}: ${action}`);
  }
}

const tenancy = memoryTenancy(workspaces);

const operator = caller(["plugin.read", "plugin.assign"]);
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let chains: MemoryChains;
let announced: string[];
const deps = () => ({ tenancy, chains, announce: (id: string) => void announced.push(id) });

beforeEach(() => {
  chains = new MemoryChains();
  announced = [];
});

const put = (workspaceKey: string, chain: string[], principal = operator) =>
  callRoute(pluginRegistryRoutes["assignments.put"], (req) => putChain(deps(), req), {
    principal,
    params: { workspaceKey },
    query: {},
    body: { chain },
  });
const get = (workspaceKey: string, principal = operator) =>
  callRoute(pluginRegistryRoutes["assignments.get"], (req) => getChain(deps(), req), {
    principal,
    params: { workspaceKey },
    query: {},
    body: null,
  });

/** The violations of a refused PUT, as `field: message`. */
async function violations(answer: Promise<unknown>): Promise<string[]> {
  const error = (await refusalOf(answer)) as SvcError & {
    violations?: ReadonlyArray<{ field: string; message: string }>;
  };
  expect(error.code).toBe(ErrorCode.ValidationFailed);
  return (error.violations ?? []).map((v) => `${v.field}: ${v.message}`);
}

describe("PUT /api/workspaces/:workspaceKey/plugins", () => {
  it("stores the chain in order, audits it and nudges the followers", async () => {
    const answer = await put("shop", ["shopfront", "audit-log"]);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      workspaceKey: "shop",
      tenantKey: "acme",
      chain: [
        { pluginId: "shopfront", state: "active", entitled: true, position: 0 },
        { pluginId: "audit-log", entitled: true, position: 1 },
      ],
    });
    expect(chains.stored.get("shop")?.ids).toEqual(["shopfront", "audit-log"]);
    expect(chains.audits).toEqual(["op: assign shop: [shopfront, audit-log]"]);
    expect(announced).toEqual(["shopfront"]);
  });

  it("refuses a plugin not installed and one the workspace is not entitled to, and writes nothing", async () => {
    await put("news", ["blogkit"]);
    chains.audits.length = 0;
    announced.length = 0;
    expect(await violations(put("news", ["blogkit", "ghost", "shopfront"]))).toEqual([
      "/body/chain/1: plugin 'ghost' is not installed",
      "/body/chain/2: workspace 'news' is not entitled to plugin 'shopfront'",
    ]);
    expect(chains.stored.get("news")?.ids).toEqual(["blogkit"]);
    expect(chains.audits).toEqual([]);
    expect(announced).toEqual([]);
  });

  it("answers 404 for a workspace the resolver does not know", async () => {
    await expect(put("ghost", ["audit-log"])).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(chains.stored.size).toBe(0);
  });

  it("lets a workspace session add only delegated plugins, keeping the platform's entries in place", async () => {
    await put("shop", ["audit-log", "shopfront"]);
    chains.delegations.add("acme/analytics");
    // Adding a delegated plugin after the platform's entries: allowed.
    expect((await put("shop", ["audit-log", "shopfront", "analytics"], shopAdmin)).status).toBe(200);
    expect(chains.stored.get("shop")?.ids).toEqual(["audit-log", "shopfront", "analytics"]);
    // Dropping or reordering the platform's undelegated entries: refused.
    expect(await violations(put("shop", ["audit-log"], shopAdmin))).toEqual([
      "/body/chain: the platform's entries [audit-log, shopfront] are not delegated to tenant 'acme': they stay, in this order",
    ]);
    expect(await violations(put("shop", ["shopfront", "audit-log"], shopAdmin))).toHaveLength(1);
    // A plugin the tenant is entitled to but that was never delegated: refused.
    expect(await violations(put("shop", ["audit-log", "shopfront", "blogkit"], shopAdmin))).toEqual([
      "/body/chain/2: plugin 'blogkit' is not delegated to tenant 'acme'",
    ]);
    expect(chains.stored.get("shop")?.ids).toEqual(["audit-log", "shopfront", "analytics"]);
  });

  it("hides another workspace's chain from a workspace session (404), by the contract's reach", async () => {
    await expect(put("news", ["blogkit"], shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(get("news", shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(chains.stored.size).toBe(0);
  });
});

describe("GET /api/workspaces/:workspaceKey/plugins", () => {
  it("answers an empty chain with the workspace's tenant, or null for one the resolver does not know", async () => {
    expect((await get("news")).body).toEqual({
      workspaceKey: "news",
      tenantKey: "zeta",
      chain: [],
      updatedAtUtc: null,
    });
    expect((await get("ghost")).body).toMatchObject({ tenantKey: null, chain: [] });
  });

  it("says which entries are no longer entitled, and when the chain last changed", async () => {
    await put("shop", ["shopfront", "analytics"]);
    const at = chains.stored.get("shop")?.at;
    tenantGrants.acme = ["shopfront"];
    try {
      expect((await get("shop")).body).toMatchObject({
        chain: [
          { pluginId: "shopfront", entitled: true },
          { pluginId: "analytics", entitled: false },
        ],
        updatedAtUtc: at?.toISOString(),
      });
    } finally {
      tenantGrants.acme = ["shopfront", "blogkit", "analytics"];
    }
  });
});
