/**
 * Hosts per tenant through their contracts, with the assignments and bindings in memory: no NATS, no
 * PostgreSQL. A host belongs to one tenant; a platform operator assigns hosts, or a platform session's
 * binding takes an unassigned one for the workspace's tenant; a workspace session binds only its tenant's
 * hosts, and a refusal never names another tenant to it.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, refusalOf, resolverRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import { MemoryHosts } from "./memory-hosts.js";
import { claimHosts, deleteHost, listHosts, putHost } from "./tenant-hosts.js";

const operator = caller(["tenant.read", "tenant.update"]);
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
    const error = await refusalOf(put("zeta", "shop.example"));
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(hosts.assigned.get("shop.example")).toBe("acme");
  });

  it("answers 404 for a tenant that does not exist and 400 for what is not a host name", async () => {
    expect((await refusalOf(put("ghost", "shop.example"))).code).toBe(ErrorCode.NotFound);
    expect((await refusalOf(list("ghost"))).code).toBe(ErrorCode.NotFound);
    expect((await refusalOf(put("acme", "not a host"))).code).toBe(ErrorCode.ValidationFailed);
    expect(hosts.assigned.size).toBe(0);
  });

  it("is the platform's alone: a workspace session is refused by the contract", async () => {
    await expect(put("acme", "shop.example", shopAdmin)).rejects.toMatchObject({ code: ErrorCode.Forbidden });
    expect(hosts.assigned.size).toBe(0);
  });

  it("keeps a host a workspace still binds (409), and answers 404 for one the tenant does not have", async () => {
    await put("acme", "shop.example");
    hosts.bindings.set("shop", { tenantKey: "acme", hosts: ["shop.example"] });
    const bound = await refusalOf(remove("acme", "shop.example"));
    expect(bound.code).toBe(ErrorCode.Conflict);
    expect(bound.message).toContain("'shop'");
    hosts.bindings.clear();
    expect((await refusalOf(remove("zeta", "shop.example"))).code).toBe(ErrorCode.NotFound);
    expect((await remove("acme", "shop.example")).status).toBe(204);
    expect(hosts.assigned.size).toBe(0);
  });
});

describe("a workspace's bindings claiming hosts", () => {
  it("passes the tenant's own hosts, once each", async () => {
    await put("acme", "shop.example");
    await hosts.change((tables) => claimHosts(tables, "acme", ["shop.example", "shop.example"], false));
    expect([...hosts.assigned]).toEqual([["shop.example", "acme"]]);
  });

  it("assigns an unassigned host to the workspace's tenant only for a caller that may assign hosts", async () => {
    await hosts.change((tables) => claimHosts(tables, "acme", ["new.example"], true));
    expect(hosts.assigned.get("new.example")).toBe("acme");
    const error = await refusalOf(
      hosts.change((tables) => claimHosts(tables, "zeta", ["other.example"], false)),
    );
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(error.message).toBe(
      "host 'other.example' is not assigned to tenant 'zeta'; a platform operator with tenant.update assigns hosts",
    );
    expect(hosts.assigned.has("other.example")).toBe(false);
  });

  it("refuses another tenant's host without naming it, and assigns none of the others then", async () => {
    await put("acme", "shop.example");
    const error = await refusalOf(
      hosts.change((tables) => claimHosts(tables, "zeta", ["fresh.example", "shop.example"], true)),
    );
    expect(error.code).toBe(ErrorCode.Conflict);
    expect(error.message).toBe("host 'shop.example' is not available to this tenant");
    expect(JSON.stringify(error.extensions)).not.toContain("acme");
    expect(hosts.assigned.has("fresh.example")).toBe(false);
  });
});
