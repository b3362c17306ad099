/**
 * Workspace resolution and the tenancy lookup through their message contracts, with the resolver's tables
 * in memory: no NATS, no PostgreSQL. Any NATS client may send these, so what the contract refuses never
 * reaches the tables, and what reaches them is normalised first.
 */
import { callMessage, resolverMessages } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import { lookupTenancy, resolveWorkspace, type TenancyRepository } from "./handlers.js";

interface Binding {
  readonly host: string;
  readonly prefix: string;
  readonly workspaceKey: string;
  readonly tenantKey: string;
  readonly visible: boolean;
}

/** The tables' answers as the SQL gives them: the longest visible prefix covering the path wins. */
class MemoryTenancy implements TenancyRepository {
  readonly asked: Array<{ host: string; path: string }> = [];
  constructor(
    private readonly bindings: readonly Binding[],
    private readonly tenantKeys: readonly string[],
  ) {}

  async findVisible(host: string, path: string, defaultTenantKey: string | null): Promise<string | null> {
    this.asked.push({ host, path });
    const covers = (prefix: string) => prefix === "/" || path === prefix || path.startsWith(`${prefix}/`);
    const found = this.bindings
      .filter((b) => b.host === host && b.visible && covers(b.prefix))
      .filter((b) => defaultTenantKey === null || b.tenantKey === defaultTenantKey)
      .sort((a, b) => b.prefix.length - a.prefix.length)[0];
    return found?.workspaceKey ?? null;
  }

  async workspaces(keys: readonly string[]) {
    const known = new Map(this.bindings.map((b) => [b.workspaceKey, b]));
    return keys.flatMap((k) => {
      const b = known.get(k);
      return b === undefined
        ? []
        : [{ workspaceKey: k, tenantKey: b.tenantKey, isActive: b.visible, tenantIsActive: true }];
    });
  }

  async tenants(keys: readonly string[]) {
    return keys.filter((k) => this.tenantKeys.includes(k));
  }
}

const tables = new MemoryTenancy(
  [
    { host: "shop.example.com", prefix: "/", workspaceKey: "shop", tenantKey: "acme", visible: true },
    { host: "shop.example.com", prefix: "/eu", workspaceKey: "shop-eu", tenantKey: "acme", visible: true },
    { host: "shop.example.com", prefix: "/old", workspaceKey: "gone", tenantKey: "acme", visible: false },
    { host: "other.example.com", prefix: "/", workspaceKey: "other", tenantKey: "zeta", visible: true },
  ],
  ["acme", "zeta"],
);

const resolve = (host: string, path: string, tenant: string | null = null) =>
  callMessage(resolverMessages["workspace.resolve"], (request) => resolveWorkspace(tables, tenant, request), {
    host,
    path,
  });

describe("resolver.workspace.resolve", () => {
  it("normalises host and path before asking the tables, as the gateway does", async () => {
    expect(await resolve("Shop.Example.COM:8443", "/eu//checkout/../cart/")).toEqual({
      resolved: true,
      workspaceKey: "shop-eu",
    });
    expect(tables.asked.at(-1)).toEqual({ host: "shop.example.com", path: "/eu/cart" });
  });

  it("leaves a path to the shorter prefix when the longer one's workspace is not visible", async () => {
    expect(await resolve("shop.example.com", "/old/page")).toEqual({ resolved: true, workspaceKey: "shop" });
    expect(await resolve("shop.example.com", "/europe")).toEqual({ resolved: true, workspaceKey: "shop" });
  });

  it("answers unresolved for an unknown or unusable host, or another tenant's, asking nothing for junk", async () => {
    expect(await resolve("nowhere.example.com", "/")).toEqual({ resolved: false, workspaceKey: null });
    expect(await resolve("other.example.com", "/", "acme")).toEqual({ resolved: false, workspaceKey: null });
    const before = tables.asked.length;
    expect(await resolve("bad host!", "/")).toEqual({ resolved: false, workspaceKey: null });
    expect(tables.asked.length).toBe(before);
  });

  it("refuses what its contract refuses, before the tables are asked", async () => {
    const before = tables.asked.length;
    await expect(resolve("h".repeat(254), "/")).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    await expect(resolve("shop.example.com", "/".repeat(2_049))).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
    });
    expect(tables.asked.length).toBe(before);
  });
});

describe("resolver.tenancy.lookup", () => {
  const lookup = (workspaceKeys: string[], tenantKeys: string[]) =>
    callMessage(resolverMessages["tenancy.lookup"], (request) => lookupTenancy(tables, request), {
      workspaceKeys,
      tenantKeys,
    });

  it("answers the workspaces and tenants that exist, each workspace with its tenant and states", async () => {
    expect(await lookup(["shop", "gone", "nope"], ["zeta", "nope"])).toEqual({
      workspaces: [
        { workspaceKey: "shop", tenantKey: "acme", isActive: true, tenantIsActive: true },
        { workspaceKey: "gone", tenantKey: "acme", isActive: false, tenantIsActive: true },
      ],
      tenants: ["zeta"],
    });
  });

  it("refuses more than 500 keys of either kind", async () => {
    const many = Array.from({ length: 501 }, (_, i) => `w${i}`);
    await expect(lookup(many, [])).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    await expect(lookup([], many)).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
  });
});
