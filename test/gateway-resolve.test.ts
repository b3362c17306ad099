/**
 * `GET /workspace/public/resolve` end to end, gateway → NATS → resolver → PostgreSQL, with the spec's
 * resolution rules and the gateway's cache kept coherent by change notifications.
 */
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";
import { until } from "./support/wait.js";

const h = await createHarness();
let base: string;

async function resolve(headers: Record<string, string>) {
  const response = await http(`${base}/workspace/public/resolve`, { headers });
  expect(response.status).toBe(200);
  expect(response.headers["content-type"]).toMatch(/^application\/json/);
  return response.json<{ resolved: boolean; workspaceKey: string | null }>();
}

beforeAll(async () => {
  await h.start(resolverService);
  // A long TTL: only the invalidation broadcast can make the gateway see a change within the test.
  const gateway = await h.start(gatewayService, { BackendHost__ResolveCacheTtlMs: "600000" });
  base = gateway.hooks.httpAddress as string;
  await h.sql(`INSERT INTO resolver.tenants (key, name) VALUES ('acme', 'Acme'), ('other', 'Other')`);
  await h.sql(`INSERT INTO resolver.workspaces (key, tenant_key, name) VALUES
      ('acme-main', 'acme', 'Main'), ('acme-shop', 'acme', 'Shop'), ('other-ws', 'other', 'Other')`);
  await h.sql(`INSERT INTO resolver.workspace_bindings (workspace_key, host, path_prefix) VALUES
      ('acme-main', 'acme.example', '/'), ('acme-shop', 'acme.example', '/shop'),
      ('other-ws', 'other.example', '/')`);
});

afterAll(() => h.stopAll());

describe("GET /workspace/public/resolve", () => {
  it("resolves the seeded workspace on localhost", async () => {
    expect(await resolve({ host: "localhost" })).toEqual({ resolved: true, workspaceKey: "default" });
  });

  it("answers unresolved for an unknown host, with 200", async () => {
    expect(await resolve({ host: "unknown.example" })).toEqual({ resolved: false, workspaceKey: null });
  });

  it("ignores the port and the case of the host", async () => {
    expect(await resolve({ host: "LocalHost:8080" })).toEqual({ resolved: true, workspaceKey: "default" });
  });

  it("prefers X-Forwarded-Host to Host", async () => {
    expect(await resolve({ host: "localhost", "x-forwarded-host": "acme.example" })).toEqual({
      resolved: true,
      workspaceKey: "acme-main",
    });
  });

  it("takes the path from X-Forwarded-Uri and picks the longest bound prefix", async () => {
    const shop = { host: "acme.example", "x-forwarded-uri": "/shop/cart?x=1" };
    expect(await resolve(shop)).toEqual({ resolved: true, workspaceKey: "acme-shop" });
    const notShop = { host: "acme.example", "x-forwarded-uri": "/shopping" };
    expect(await resolve(notShop)).toEqual({ resolved: true, workspaceKey: "acme-main" });
  });

  it("falls back to / when no path is given", async () => {
    expect(await resolve({ host: "acme.example" })).toEqual({ resolved: true, workspaceKey: "acme-main" });
  });

  it("answers unresolved for a malformed host without failing", async () => {
    expect(await resolve({ host: "localhost", "x-forwarded-host": "bad host/../x" })).toEqual({
      resolved: false,
      workspaceKey: null,
    });
  });

  it("hides an inactive workspace and sees it again when reactivated (cache invalidated)", async () => {
    const headers = { host: "other.example" };
    expect(await resolve(headers)).toEqual({ resolved: true, workspaceKey: "other-ws" });
    await h.sql(`UPDATE resolver.workspaces SET is_active = false WHERE key = 'other-ws'`);
    await until(async () => (await resolve(headers)).resolved === false);
    await h.sql(`UPDATE resolver.workspaces SET is_active = true WHERE key = 'other-ws'`);
    await until(async () => (await resolve(headers)).resolved === true);
  });

  it("hides every workspace of a suspended tenant", async () => {
    const headers = { host: "acme.example", "x-forwarded-uri": "/shop" };
    expect(await resolve(headers)).toEqual({ resolved: true, workspaceKey: "acme-shop" });
    await h.sql(`UPDATE resolver.tenants SET is_active = false WHERE key = 'acme'`);
    await until(async () => (await resolve(headers)).resolved === false);
    await h.sql(`UPDATE resolver.tenants SET is_active = true WHERE key = 'acme'`);
    await until(async () => (await resolve(headers)).resolved === true);
  });

  it("falls back to the shorter prefix when the longer one's workspace is invisible", async () => {
    const headers = { host: "acme.example", "x-forwarded-uri": "/shop" };
    await h.sql(`UPDATE resolver.workspaces SET is_active = false WHERE key = 'acme-shop'`);
    await until(async () => (await resolve(headers)).workspaceKey === "acme-main");
    await h.sql(`UPDATE resolver.workspaces SET is_active = true WHERE key = 'acme-shop'`);
    await until(async () => (await resolve(headers)).workspaceKey === "acme-shop");
  });
});

describe("default tenant key", () => {
  it("hides workspaces of other tenants when a default tenant key is configured", async () => {
    // Its own subject prefix, so that only the resolver configured with the default tenant answers it.
    const scoped = {
      BackendHost__DefaultTenantKey: "acme",
      SVC_SUBJECT_PREFIX: `${h.env.SVC_SUBJECT_PREFIX}dt`,
    };
    const resolver = await h.start(resolverService, scoped);
    const registry = await h.start(pluginRegistryService, scoped);
    const gateway = await h.start(gatewayService, scoped);
    try {
      // The UI chain too: only the default tenant's
      // workspaces expose it; another tenant's answers the 404 of a workspace that does not exist.
      const chain = (wk: string) =>
        http(`${gateway.hooks.httpAddress}/workspace/public/ui-chain?workspaceKey=${wk}`);
      expect((await chain("other-ws")).status).toBe(404);
      expect((await chain("acme-main")).json()).toEqual({ workspaceKey: "acme-main", chain: [] });
      const url = `${gateway.hooks.httpAddress}/workspace/public/resolve`;
      expect((await http(url, { headers: { host: "other.example" } })).json()).toEqual({
        resolved: false,
        workspaceKey: null,
      });
      expect((await http(url, { headers: { host: "acme.example" } })).json()).toEqual({
        resolved: true,
        workspaceKey: "acme-main",
      });
    } finally {
      await gateway.stop();
      await registry.stop();
      await resolver.stop();
    }
  });
});
