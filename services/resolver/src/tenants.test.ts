/**
 * Tenants through their contracts, with the tenants and their workspaces in memory: no NATS, no
 * PostgreSQL. A key is taken once; a suspended tenant shows as `suspended`; a tenant with workspaces is
 * deleted only when asked to delete them too, and then each workspace's deletion is recorded before the
 * tenant's, which names them.
 */
import { caller, callRoute, type PlatformEventData, resolverRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  activateTenant,
  createTenant,
  deleteTenant,
  getTenant,
  listTenants,
  suspendTenant,
  type Tenant,
  type TenantRemoval,
  type TenantTables,
} from "./tenants.js";

class MemoryTenants implements TenantTables {
  readonly stored = new Map<string, Omit<Tenant, "workspaceCount">>();
  /** Workspace → tenant. */
  readonly workspaces = new Map<string, string>();
  readonly events: string[] = [];

  private withCount(t: Omit<Tenant, "workspaceCount">): Tenant {
    return { ...t, workspaceCount: [...this.workspaces.values()].filter((k) => k === t.key).length };
  }
  async create(key: string, name: string) {
    if (this.stored.has(key)) return false;
    this.stored.set(key, { key, name, isActive: true, createdAt: new Date(0), updatedAt: new Date(0) });
    return true;
  }
  async page(after: string | null, limit: number) {
    return [...this.stored.values()]
      .filter((t) => after === null || t.key > after)
      .sort((a, b) => (a.key < b.key ? -1 : 1))
      .slice(0, limit + 1)
      .map((t) => this.withCount(t));
  }
  async find(key: string) {
    const t = this.stored.get(key);
    return t === undefined ? null : this.withCount(t);
  }
  async setActive(key: string, active: boolean) {
    const t = this.stored.get(key);
    if (t === undefined) return false;
    this.stored.set(key, { ...t, isActive: active, updatedAt: new Date(1) });
    return true;
  }
  async removal<T>(key: string, removal: (tables: TenantRemoval) => Promise<T>): Promise<T> {
    const events: string[] = [];
    let removed = false;
    const result = await removal({
      workspaces: async () =>
        this.stored.has(key)
          ? [...this.workspaces]
              .filter(([, t]) => t === key)
              .map(([w]) => w)
              .sort()
          : null,
      remove: async () => {
        removed = true;
        return [];
      },
      record: async <N extends "workspace.deleted" | "tenant.deleted">(
        eventName: N,
        workspaceKey: string | null,
        data: PlatformEventData[N],
      ) => {
        events.push(`${eventName} ${workspaceKey ?? "-"} ${JSON.stringify(data)}`);
      },
    });
    // Committed only when the removal returned.
    if (removed) {
      this.stored.delete(key);
      for (const [w, t] of this.workspaces) if (t === key) this.workspaces.delete(w);
    }
    this.events.push(...events);
    return result;
  }
}

const operator = caller(["tenant.read", "tenant.create", "tenant.update", "tenant.delete"]);

let tables: MemoryTenants;
const deps = () => ({ tenants: tables, mediaBytes: { delete: async () => undefined } });
beforeEach(() => {
  tables = new MemoryTenants();
});

const create = (tenantKey: string, name = tenantKey) =>
  callRoute(resolverRoutes["tenants.create"], (req) => createTenant(deps(), req), {
    principal: operator,
    params: {},
    query: {},
    body: { tenantKey, name },
  });
const remove = (tenantKey: string, deleteWorkspaces?: boolean) =>
  callRoute(resolverRoutes["tenants.delete"], (req) => deleteTenant(deps(), req), {
    principal: operator,
    params: { tenantKey },
    query: deleteWorkspaces === undefined ? {} : { deleteWorkspaces },
    body: null,
  });
const get = (tenantKey: string) =>
  callRoute(resolverRoutes["tenants.get"], (req) => getTenant(deps(), req), {
    principal: operator,
    params: { tenantKey },
    query: {},
    body: null,
  });

describe("tenants", () => {
  it("creates a tenant (201, active, with its location) and refuses its key a second time (409)", async () => {
    expect(await create("acme", "Acme")).toMatchObject({
      status: 201,
      headers: { location: "/api/tenants/acme" },
      body: { tenantKey: "acme", name: "Acme", state: "active", isActive: true, workspaceCount: 0 },
    });
    await expect(create("acme", "Other")).rejects.toMatchObject({ code: ErrorCode.Conflict });
    expect(tables.stored.get("acme")?.name).toBe("Acme");
  });

  it("suspends and activates a tenant, and answers 404 for one that does not exist", async () => {
    await create("acme");
    const suspend = (tenantKey: string) =>
      callRoute(resolverRoutes["tenants.suspend"], (req) => suspendTenant(deps(), req), {
        principal: operator,
        params: { tenantKey },
        query: {},
        body: null,
      });
    expect((await suspend("acme")).body).toMatchObject({ state: "suspended", isActive: false });
    const activate = (tenantKey: string) =>
      callRoute(resolverRoutes["tenants.activate"], (req) => activateTenant(deps(), req), {
        principal: operator,
        params: { tenantKey },
        query: {},
        body: null,
      });
    expect((await activate("acme")).body).toMatchObject({ state: "active", isActive: true });
    expect(tables.stored.get("acme")?.isActive).toBe(true);
    await expect(activate("ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(suspend("ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(get("ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });

  it("lists tenants by key in pages, with their workspace counts", async () => {
    for (const key of ["c-one", "a-one", "b-one"]) await create(key);
    tables.workspaces.set("shop", "b-one");
    const list = (query: Record<string, string | number>) =>
      callRoute(resolverRoutes["tenants.list"], (req) => listTenants(deps(), req), {
        principal: operator,
        params: {},
        query,
        body: null,
      });
    const first = (await list({ limit: 2 })).body;
    expect(first?.items.map((t) => [t.tenantKey, t.workspaceCount])).toEqual([
      ["a-one", 0],
      ["b-one", 1],
    ]);
    expect((await list({ limit: 2, cursor: first?.nextCursor as string })).body).toMatchObject({
      items: [{ tenantKey: "c-one" }],
      nextCursor: null,
    });
  });

  it("keeps a tenant with workspaces unless asked to delete them (409 with the count), and records nothing", async () => {
    await create("acme");
    tables.workspaces.set("shop", "acme");
    tables.workspaces.set("blog", "acme");
    await expect(remove("acme")).rejects.toMatchObject({
      code: ErrorCode.Conflict,
      extensions: { workspaceCount: 2 },
    });
    await expect(remove("acme", false)).rejects.toMatchObject({ code: ErrorCode.Conflict });
    expect(tables.stored.has("acme")).toBe(true);
    expect(tables.events).toEqual([]);
  });

  it("deletes a tenant with its workspaces when asked: each workspace's event, then the tenant's naming them", async () => {
    await create("acme");
    await create("zeta");
    tables.workspaces.set("shop", "acme");
    tables.workspaces.set("blog", "acme");
    tables.workspaces.set("news", "zeta");
    expect((await remove("acme", true)).status).toBe(204);
    expect(tables.events).toEqual([
      'workspace.deleted blog {"workspaceKey":"blog","tenantKey":"acme"}',
      'workspace.deleted shop {"workspaceKey":"shop","tenantKey":"acme"}',
      'tenant.deleted - {"tenantKey":"acme","workspaceKeys":["blog","shop"]}',
    ]);
    expect([...tables.workspaces.keys()]).toEqual(["news"]);
    await expect(remove("acme", true)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    // A tenant without workspaces needs no flag.
    tables.workspaces.clear();
    expect((await remove("zeta")).status).toBe(204);
    expect(tables.events.at(-1)).toBe('tenant.deleted - {"tenantKey":"zeta","workspaceKeys":[]}');
  });
});
