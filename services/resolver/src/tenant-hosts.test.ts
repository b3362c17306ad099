/**
 * Hosts per tenant through their contracts, with the assignments and bindings in memory: no NATS, no
 * PostgreSQL. A host belongs to one tenant; a platform operator assigns hosts, or a platform session's
 * binding takes an unassigned one for the workspace's tenant; a workspace session binds only its tenant's
 * hosts, and a refusal never names another tenant to it.
 */
import type { Principal } from "@svc/bus";
import { callRoute, resolverRoutes } from "@svc/contracts";
import { ErrorCode, SvcError } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  claimHosts,
  deleteHost,
  type HostAssignment,
  type HostChange,
  type HostTables,
  listHosts,
  putHost,
} from "./tenant-hosts.js";

class MemoryHosts implements HostTables, HostChange {
  readonly tenants = new Set(["acme", "zeta"]);
  readonly owners_ = new Map<string, string>();
  /** Bindings: workspace → tenant and hosts. */
  readonly bindings = new Map<string, { tenantKey: string; hosts: string[] }>();
  changes = 0;

  async tenantExists(tenantKey: string) {
    return this.tenants.has(tenantKey);
  }
  async assignments(tenantKey: string): Promise<HostAssignment[]> {
    return [...this.owners_]
      .filter(([, t]) => t === tenantKey)
      .map(([host, t]) => ({ host, tenantKey: t, createdAt: new Date(0) }))
      .sort((a, b) => a.host.localeCompare(b.host));
  }
  async change<T>(change: (tables: HostChange) => Promise<T>): Promise<T> {
    this.changes++;
    const before = new Map(this.owners_);
    try {
      return await change(this);
    } catch (error) {
      this.owners_.clear();
      for (const [k, v] of before) this.owners_.set(k, v);
      throw error;
    }
  }
  async owners(hosts: readonly string[]) {
    return new Map(hosts.flatMap((h) => (this.owners_.has(h) ? [[h, this.owners_.get(h) as string]] : [])));
  }
  async assign(hosts: readonly string[], tenantKey: string) {
    const made = hosts.filter((h) => !this.owners_.has(h));
    for (const h of made) this.owners_.set(h, tenantKey);
    return made.map((host) => ({ host, tenantKey, createdAt: new Date(0) }));
  }
  async assignment(host: string) {
    const tenantKey = this.owners_.get(host);
    return tenantKey === undefined ? null : { host, tenantKey, createdAt: new Date(0) };
  }
  async boundBy(host: string, tenantKey: string) {
    return (
      [...this.bindings].find(([, b]) => b.tenantKey === tenantKey && b.hosts.includes(host))?.[0] ?? null
    );
  }
  async release(host: string, tenantKey: string) {
    if (this.owners_.get(host) !== tenantKey) return false;
    this.owners_.delete(host);
    return true;
  }
}

const operator: Principal = {
  subject: "op",
  scope: "platform",
  workspaceKey: null,
  permissions: ["tenant.read", "tenant.update"],
  roles: ["operator"],
};
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let hosts: MemoryHosts;
const deps = () => ({ hosts });
beforeEach(() => {
  hosts = new MemoryHosts();
});

const put = (tenantKey: string, host: string, principal = operator) =>
  callRoute(resolverRoutes["tenant-hosts.put"], (req) => putHost(deps(), req), {
    principal,
    params: { tenantKey, host },
    query: {},
    body: null,
  });
const remove = (tenantKey: string, host: string) =>
  callRoute(resolverRoutes["tenant-hosts.delete"], (req) => deleteHost(deps(), req), {
    principal: operator,
    params: { tenantKey, host },
    query: {},
    body: null,
  });
const list = (tenantKey: string) =>
  callRoute(resolverRoutes["tenant-hosts.list"], (req) => listHosts(deps(), req), {
    principal: operator,
    params: { tenantKey },
    query: {},
    body: null,
  });

async function refusal(answer: Promise<unknown>): Promise<SvcError> {
  const error = await answer.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SvcError);
  return error as SvcError;
}

describe("assigning hosts to tenants", () => {
  it("assigns a host (201, with its location), answers 200 when it is the tenant's already, and lists it", async () => {
    expect(await put("acme", "shop.example")).toMatchObject({
      status: 201,
      headers: { location: "/api/tenants/acme/hosts/shop.example" },
      body: { host: "shop.example", tenantKey: "acme" },
    });
    expect((await put("acme", "shop.example")).status).toBe(200);
    await put("acme", "a.example");
    expect((await list("acme")).body?.items.map((i) => i.host)).toEqual(["a.example", "shop.example"]);
    expect((await list("zeta")).body?.items).toEqual([]);
  });

  it("refuses another tenant's host (409) and keeps it where it is", async () => {
    await put("acme", "shop.example");
    const error = await refusal(put("zeta", "shop.example"));
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(hosts.owners_.get("shop.example")).toBe("acme");
  });

  it("answers 404 for a tenant that does not exist and 400 for what is not a host name", async () => {
    expect((await refusal(put("ghost", "shop.example"))).code).toBe(ErrorCode.NotFound);
    expect((await refusal(list("ghost"))).code).toBe(ErrorCode.NotFound);
    expect((await refusal(put("acme", "not a host"))).code).toBe(ErrorCode.ValidationFailed);
    expect(hosts.owners_.size).toBe(0);
  });

  it("is the platform's alone: a workspace session is refused by the contract", async () => {
    await expect(put("acme", "shop.example", shopAdmin)).rejects.toMatchObject({ code: ErrorCode.Forbidden });
    expect(hosts.owners_.size).toBe(0);
  });

  it("keeps a host a workspace still binds (409), and answers 404 for one the tenant does not have", async () => {
    await put("acme", "shop.example");
    hosts.bindings.set("shop", { tenantKey: "acme", hosts: ["shop.example"] });
    const bound = await refusal(remove("acme", "shop.example"));
    expect(bound.code).toBe(ErrorCode.Conflict);
    expect(bound.message).toContain("'shop'");
    hosts.bindings.clear();
    expect((await refusal(remove("zeta", "shop.example"))).code).toBe(ErrorCode.NotFound);
    expect((await remove("acme", "shop.example")).status).toBe(204);
    expect(hosts.owners_.size).toBe(0);
  });
});

describe("a workspace's bindings claiming hosts", () => {
  it("passes the tenant's own hosts, once each", async () => {
    await put("acme", "shop.example");
    await hosts.change((tables) => claimHosts(tables, "acme", ["shop.example", "shop.example"], false));
    expect([...hosts.owners_]).toEqual([["shop.example", "acme"]]);
  });

  it("assigns an unassigned host to the workspace's tenant for a platform session only", async () => {
    await hosts.change((tables) => claimHosts(tables, "acme", ["new.example"], true));
    expect(hosts.owners_.get("new.example")).toBe("acme");
    const error = await refusal(
      hosts.change((tables) => claimHosts(tables, "zeta", ["other.example"], false)),
    );
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(error.message).toBe(
      "host 'other.example' is not assigned to tenant 'zeta'; a platform operator assigns hosts",
    );
    expect(hosts.owners_.has("other.example")).toBe(false);
  });

  it("refuses another tenant's host without naming it, and assigns none of the others then", async () => {
    await put("acme", "shop.example");
    const error = await refusal(
      hosts.change((tables) => claimHosts(tables, "zeta", ["fresh.example", "shop.example"], true)),
    );
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(error.message).toBe("host 'shop.example' is not available to this tenant");
    expect(JSON.stringify(error.extensions)).not.toContain("acme");
    expect(hosts.owners_.has("fresh.example")).toBe(false);
  });
});
