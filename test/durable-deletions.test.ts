/**
 * Deleting a workspace or a tenant cleaned memberships, grants, delegations, chains and
 * themes through a fire-and-forget broadcast; a service that missed it (down, restarting) kept them, and a
 * workspace created again under the same key, even by another tenant, inherited them. The deletions now
 * travel as events the services follow with durable consumers. The fault: rbac, the plugin registry and the
 * webhook dispatcher are stopped while the tenant is deleted, and started again.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createDb } from "@svc/db";
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { forgetWorkspace, webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { examplePackage } from "../scripts/lib/example-plugin.js";
import { fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, installPackage } from "./support/http.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-deletions-"));
const env = {
  ...pluginStackEnv(work, { dev: true, tests: fixtureSigner() }),
  BackendHost__RateLimitApiPerMinute: "0",
  BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
};
const receiver = new Receiver();
let base: string;
let operator: string;
const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);
const count = async (query: string) => (await h.sql<{ n: number }>(query))[0]?.n ?? -1;

beforeAll(async () => {
  await receiver.start();
  await h.start(resolverService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});
afterAll(async () => {
  await h.stopAll();
  await receiver.stop();
  rmSync(work, { recursive: true, force: true });
});

/** A webhook subscription and a flow of workspace shared-key, made by a tenant's operator; the subscription's id. */
async function subscriptionAndFlow(tenant: string): Promise<string> {
  const subscribed = await asOperator("POST", "/api/webhooks", {
    eventName: "workspace.member-assigned",
    workspaceKey: "shared-key",
    targetUrl: receiver.url,
    secret: `${tenant}-tenant-secret`,
  });
  expect(subscribed.status, subscribed.text).toBe(201);
  const flow = await asOperator("POST", "/api/flows", {
    name: `${tenant}'s flow`,
    workspaceKey: "shared-key",
    eventName: "workspace.member-assigned",
    actions: [{ type: "notify", title: "Welcome" }],
  });
  expect(flow.status, flow.text).toBe(201);
  return subscribed.json<{ id: string }>().id;
}

describe("deletions reach services that were down", () => {
  it("a tenant deleted while rbac, the registry and the dispatcher were stopped leaves nothing for a new tenant to inherit", async () => {
    let rbac = await h.start(rbacService, env);
    let registry = await h.start(pluginRegistryService, env);
    let dispatcher = await h.start(webhookDispatcherService, env);
    expect((await installPackage(base, operator, await examplePackage())).status).toBe(201);
    expect((await asOperator("POST", "/api/tenants", { tenantKey: "old", name: "Old" })).status).toBe(201);
    expect(
      (await asOperator("PUT", "/api/workspaces/shared-key", { tenantKey: "old", name: "Old's" })).status,
    ).toBe(201);
    // The old workspace's webhook subscription and flow.
    const oldSubscription = await subscriptionAndFlow("old");
    const user = await asOperator("POST", "/api/users", {
      userName: "old-member",
      password: "a long enough password",
    });
    const userId = user.json<{ id: string }>().id;
    expect((await asOperator("PUT", `/api/workspaces/shared-key/members/${userId}`)).status).toBe(201);
    const integration = await asOperator("POST", "/api/security/integrations", {
      name: "Old's client",
      workspaceKey: "shared-key",
      permissions: ["webhook.read"],
    });
    expect(integration.status, integration.text).toBe(201);
    // Delivered, and in the delivery log its sessions read.
    const logged = `SELECT count(*)::int AS n FROM webhook_dispatcher.deliveries WHERE reach_key = 'shared-key'`;
    await until(async () => (await count(logged)) === 1, 15_000);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "old", pluginId: "hello", entitled: true }],
    });
    expect(
      (await asOperator("PUT", "/api/tenants/old/plugins/hello/delegation", { delegated: true })).status,
    ).toBe(200);
    expect((await asOperator("PUT", "/api/workspaces/shared-key/plugins", { chain: ["hello"] })).status).toBe(
      200,
    );

    await rbac.stop();
    await registry.stop();
    await dispatcher.stop();
    expect((await asOperator("DELETE", "/api/tenants/old?deleteWorkspaces=true")).status).toBe(204);
    const deletedBy = new Date();
    // Another tenant takes the same workspace key while they are down.
    expect((await asOperator("POST", "/api/tenants", { tenantKey: "new", name: "New" })).status).toBe(201);
    expect(
      (await asOperator("PUT", "/api/workspaces/shared-key", { tenantKey: "new", name: "New's" })).status,
    ).toBe(201);
    expect(
      await count(`SELECT count(*)::int AS n FROM rbac.memberships WHERE workspace_key = 'shared-key'`),
    ).toBe(1);

    rbac = await h.start(rbacService, env);
    registry = await h.start(pluginRegistryService, env);
    dispatcher = await h.start(webhookDispatcherService, env);
    await until(
      async () =>
        (await count(
          `SELECT count(*)::int AS n FROM rbac.memberships WHERE workspace_key = 'shared-key'`,
        )) === 0 &&
        (await count(
          `SELECT count(*)::int AS n FROM plugin_registry.workspace_plugins WHERE workspace_key = 'shared-key'`,
        )) === 0 &&
        (await count(
          `SELECT count(*)::int AS n FROM plugin_registry.delegations WHERE tenant_key = 'old'`,
        )) === 0 &&
        (await count(
          `SELECT count(*)::int AS n FROM plugin_registry.entitlements WHERE subject_key = 'old'`,
        )) === 0 &&
        (await count(
          `SELECT count(*)::int AS n FROM webhook_dispatcher.subscriptions WHERE workspace_key = 'shared-key'`,
        )) === 0,
      15_000,
    );
    // The old workspace's flow, delivery log and its attempts went with its subscription.
    expect(
      await count(
        `SELECT count(*)::int AS n FROM webhook_dispatcher.flows WHERE workspace_key = 'shared-key'`,
      ),
    ).toBe(0);
    expect(await count(logged)).toBe(0);
    // Its delivery's job is no longer the workspace's (a platform session still sees it).
    expect(
      await count(`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE workspace_key = 'shared-key'`),
    ).toBe(0);
    expect(
      await count(`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'webhook.deliver'`),
    ).toBeGreaterThan(0);
    expect(
      await count(
        `SELECT count(*)::int AS n FROM webhook_dispatcher.delivery_attempts a
         LEFT JOIN webhook_dispatcher.deliveries d USING (delivery_id) WHERE d.delivery_id IS NULL`,
      ),
    ).toBe(0);
    const reader = await mintToken({
      scope: "workspace",
      workspaceKey: "shared-key",
      permissions: ["webhook.read", "flow.read"],
    });
    expect((await api("GET", "/api/webhooks", reader)).json<{ items: unknown[] }>().items).toEqual([]);
    expect((await api("GET", "/api/flows", reader)).json<{ items: unknown[] }>().items).toEqual([]);
    expect((await api("GET", `/api/webhooks/${oldSubscription}/deliveries`, reader)).status).toBe(404);
    // What the new workspace makes after the deletion stays, also when the deletion is applied again.
    await subscriptionAndFlow("new");
    const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 2, applicationName: "deletions-test" });
    try {
      expect(await forgetWorkspace(db, "shared-key", deletedBy)).toEqual({
        subscriptions: 0,
        flows: 0,
        deliveries: 0,
        jobs: 0,
      });
    } finally {
      await db.end();
    }
    expect((await api("GET", "/api/webhooks", reader)).json<{ items: unknown[] }>().items).toHaveLength(1);
    expect((await api("GET", "/api/flows", reader)).json<{ items: unknown[] }>().items).toHaveLength(1);
    // The new tenant's workspace of the same key has no member, API client, chain or grant of the old one.
    expect(
      await count(`SELECT count(*)::int AS n FROM rbac.integrations WHERE workspace_key = 'shared-key'`),
    ).toBe(0);
    const members = await asOperator("GET", "/api/workspaces/shared-key/members");
    expect(members.json<{ items: unknown[] }>().items).toEqual([]);
    const chain = await asOperator("GET", "/api/workspaces/shared-key/plugins");
    expect(chain.json<{ chain: unknown[] }>().chain).toEqual([]);
  }, 60_000);
});
