/**
 * Plugins at work, on real NATS and PostgreSQL. The example plugin is activated and its routes
 * answer through the gateway with the guard; deactivated, they are 404. A workspace admin's session
 * carries the plugin's keys only while it is active and in the workspace's chain. An event the plugin
 * publishes reaches a webhook receiver with its sensitive field masked. A plugin that throws, loops,
 * exhausts its heap, exits or crashes later is contained: the service keeps answering and the plugin is
 * marked failed.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { connect } from "@nats-io/transport-node";
import type { PluginEvents, PluginHost, PluginLog, PluginRequest } from "@svc/plugin-sdk";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { Ajv } from "ajv";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { examplePackage } from "../scripts/lib/example-plugin.js";
import {
  codePlugin,
  fixtureSigner,
  MISBEHAVING,
  MISBEHAVING_ROUTES,
  pluginStackEnv,
} from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http, type HttpResponse, installPackage, signIn } from "./support/http.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { eventually, until } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-runtime-"));
const signer = fixtureSigner();
const receiver = new Receiver();
let base: string;
let operator: string;

const env = {
  ...pluginStackEnv(work, { dev: true, tests: signer }),
  BackendHost__RateLimitAuthPerMinute: "0",
  BackendHost__RateLimitAuthPerAccountPerMinute: "0",
  BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  BackendHost__JobPollIntervalMs: "100",
  BackendHost__PluginCallTimeoutMs: "1500",
  BackendHost__PluginHangTimeoutMs: "600",
  BackendHost__PluginMemoryLimitMb: "32",
  // The production default (the suite's other files start none): activations take started processes.
  BackendHost__PluginSpareProcesses: "2",
};

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

const install = (bytes: Buffer): Promise<HttpResponse> => installPackage(base, operator, bytes);

const stateOf = async (id: string) =>
  (await asOperator("GET", "/api/plugins"))
    .json<Array<{ pluginId: string; state: string; failureReason: string }>>()
    .find((p) => p.pluginId === id);

beforeAll(async () => {
  await receiver.start();
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(webhookDispatcherService, env);
  await h.start(jobReaperService, env);
  await h.start(pluginRegistryService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  expect((await install(await examplePackage())).status).toBe(201);
  // Tenants and workspaces written straight to the database: two tenants with a workspace each.
  await h.sql(`INSERT INTO resolver.tenants (key, name) VALUES ('acme', 'Acme'), ('other', 'Other')`);
  await h.sql(
    `INSERT INTO resolver.workspaces (key, tenant_key, name) VALUES ('ws-hello', 'acme', 'Hello'), ('ws-other', 'other', 'Other')`,
  );
});

afterAll(async () => {
  await h.stopAll();
  await receiver.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("activation and plugin routes", () => {
  it("serves the plugin's routes only while it is active, behind the guard", async () => {
    // Installed but inactive: the route is unknown.
    expect((await asOperator("GET", "/api/plugins/hello/greeting")).status).toBe(404);
    const activated = await asOperator("POST", "/api/plugins/hello/activate");
    expect(activated.status, activated.text).toBe(200);
    expect(activated.json()).toMatchObject({ pluginId: "hello", state: "active", isActive: true });

    const greeting = await eventually(
      () => asOperator("GET", "/api/plugins/hello/greeting?name=Ada"),
      (r) => r.status === 200,
    );
    expect(greeting.json()).toMatchObject({ greeting: "Hello, Ada!" });

    // Empty key: any authenticated caller; anonymous is 401.
    const nobody = await mintToken({ scope: "platform", permissions: [] });
    expect((await api("GET", "/api/plugins/hello/greeting", nobody)).status).toBe(200);
    expect((await api("GET", "/api/plugins/hello/greeting", null)).status).toBe(401);

    // A keyed route: 403 naming the plugin's key; the key, `*` and superadmin pass.
    const denied = await api("GET", "/api/plugins/hello/stats", nobody);
    expect(denied.status).toBe(403);
    expect(denied.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(denied.json()).toMatchObject({ status: 403, missingPermission: "hello.greeting.read" });
    const holder = await mintToken({ scope: "platform", permissions: ["hello.greeting.read"] });
    expect((await api("GET", "/api/plugins/hello/stats", holder)).status).toBe(200);
    const star = await mintToken({ scope: "platform", permissions: ["*"] });
    expect((await api("GET", "/api/plugins/hello/stats", star)).status).toBe(200);
    expect((await asOperator("GET", "/api/plugins/hello/stats")).json()).toMatchObject({ greetings: 2 });

    // A path or method the plugin does not declare.
    expect((await asOperator("GET", "/api/plugins/hello/nothing")).status).toBe(404);
    expect((await asOperator("DELETE", "/api/plugins/hello/greeting")).status).toBe(405);
    expect((await asOperator("GET", "/api/plugins/nobody/greeting")).status).toBe(404);

    const deactivated = await asOperator("POST", "/api/plugins/hello/deactivate");
    expect(deactivated.json()).toMatchObject({ state: "inactive" });
    expect(
      (
        await eventually(
          () => asOperator("GET", "/api/plugins/hello/greeting"),
          (r) => r.status === 404,
        )
      ).status,
    ).toBe(404);
    const audit = (await asOperator("GET", "/api/plugins/audit")).json<{
      items: Array<{ action: string }>;
    }>();
    expect(audit.items.map((a) => a.action)).toEqual(expect.arrayContaining(["activate", "deactivate"]));
  });

  it("refuses to activate what is not installed, and a plugin whose handlers are missing", async () => {
    expect((await asOperator("POST", "/api/plugins/nothing-here/activate")).status).toBe(404);
    const bytes = await codePlugin(work, signer, "lacking", "export class Plugin {}\n", [
      { method: "GET", path: "/x", handler: "absent" },
    ]);
    expect((await install(bytes)).status).toBe(201);
    const refused = await asOperator("POST", "/api/plugins/lacking/activate");
    expect(refused.status).toBe(422);
    expect(refused.json<{ detail: string }>().detail).toContain("absent");
    expect(await stateOf("lacking")).toMatchObject({ state: "inactive" });
    expect((await asOperator("DELETE", "/api/plugins/lacking")).status).toBe(204);
  });
});

describe("the host API is the plugin SDK's", () => {
  // Every member of the SDK's declarations, with the kind of value the runtime must give; a member added
  // to or removed from the SDK fails to compile here until the runtime's is checked too.
  const log = { debug: "function", info: "function", warn: "function", error: "function" } satisfies Record<
    keyof PluginLog,
    "function"
  >;
  const events = { publish: "function", decorate: "function" } satisfies Record<
    keyof PluginEvents,
    "function"
  >;
  const host = { pluginId: "string", version: "string", log, events } satisfies Record<
    keyof PluginHost,
    unknown
  >;
  const request = {
    route: "object",
    method: "string",
    path: "string",
    params: "object",
    query: "object",
    headers: "object",
    body: "object",
    principal: "object",
  } satisfies Record<keyof PluginRequest, string>;

  it("a plugin receives exactly the PluginHost and PluginRequest members the SDK declares", async () => {
    const code = `
const shape = (o) => Object.fromEntries(Object.keys(o).map((k) =>
  [k, typeof o[k] === "object" && o[k] !== null && !Array.isArray(o[k]) && Object.values(o[k]).some((v) => typeof v === "function") ? shape(o[k]) : typeof o[k]]));
export class Plugin {
  constructor(host) { this.seen = shape(host); }
  show(request) { return { host: this.seen, request: shape(request) }; }
}
`;
    const bytes = await codePlugin(work, signer, "shapes", code, [
      { method: "POST", path: "/show", handler: "show" },
    ]);
    expect((await install(bytes)).status).toBe(201);
    expect((await asOperator("POST", "/api/plugins/shapes/activate")).status).toBe(200);
    const r = await eventually(
      () => asOperator("POST", "/api/plugins/shapes/show", { any: 1 }),
      (x) => x.status === 200,
    );
    expect(r.json()).toEqual({ host, request });
    expect((await asOperator("DELETE", "/api/plugins/shapes")).status).toBe(204);
  });
});

describe("the local extraction cache", () => {
  it("is verified again before each load: a copy edited on disk is replaced from the shared store", async () => {
    const activated = await asOperator("POST", "/api/plugins/hello/activate");
    const sha = activated.json<{ packageSha256: string }>().packageSha256;
    const entry = join(work, "cache", sha, "index.mjs");
    const original = readFileSync(entry, "utf8");
    writeFileSync(entry, original.replace("Hello, ${name}!", "Tampered, ${name}!"));
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    const greeting = await eventually(
      () => asOperator("GET", "/api/plugins/hello/greeting?name=Ada"),
      (r) => r.status === 200,
    );
    expect(greeting.json()).toMatchObject({ greeting: "Hello, Ada!" });
    expect(readFileSync(entry, "utf8")).toBe(original);
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
  });
  it("keeps an installed plugin's copy across deactivations, so activating right after one never finds it removed; an uninstall removes it", async () => {
    const bytes = await codePlugin(work, signer, "cycler", "export class Plugin { ok() { return {}; } }\n", [
      { method: "GET", path: "/ok", handler: "ok" },
    ]);
    expect((await install(bytes)).status).toBe(201);
    let sha = "";
    // Each deactivation's reconcile runs while the next activation unpacks and loads (the bench's race).
    for (let i = 0; i < 20; i++) {
      const on = await asOperator("POST", "/api/plugins/cycler/activate");
      expect(on.status, on.text).toBe(200);
      sha = on.json<{ packageSha256: string }>().packageSha256;
      expect((await asOperator("POST", "/api/plugins/cycler/deactivate")).status).toBe(200);
    }
    // Another plugin's uninstall: once its copy is gone, a prune ran after cycler's last deactivation.
    const marker = await codePlugin(work, signer, "marker", "export class Plugin { ok() { return {}; } }\n", [
      { method: "GET", path: "/ok", handler: "ok" },
    ]);
    expect((await install(marker)).status).toBe(201);
    const markerOn = await asOperator("POST", "/api/plugins/marker/activate");
    expect(markerOn.status, markerOn.text).toBe(200);
    const markerCopy = join(work, "cache", markerOn.json<{ packageSha256: string }>().packageSha256);
    expect((await asOperator("DELETE", "/api/plugins/marker")).status).toBe(204);
    await until(async () => !existsSync(markerCopy), 10_000);
    const copy = join(work, "cache", sha);
    expect(existsSync(copy)).toBe(true);
    expect((await asOperator("DELETE", "/api/plugins/cycler")).status).toBe(204);
    await until(async () => !existsSync(copy), 10_000);
  }, 60_000);
  it("activates a package reinstalled right after its uninstall, while the uninstall's prune removes its copy", async () => {
    const bytes = await codePlugin(work, signer, "again", "export class Plugin { ok() { return {}; } }\n", [
      { method: "GET", path: "/ok", handler: "ok" },
    ]);
    // The uninstall's reconcile prunes the copy the reinstall's activation finds on disk (the bench's
    // second race: the copy vanished between the activation's check and its process taking the files).
    for (let i = 0; i < 15; i++) {
      expect((await install(bytes)).status).toBe(201);
      const on = await asOperator("POST", "/api/plugins/again/activate");
      expect(on.status, on.text).toBe(200);
      expect((await asOperator("DELETE", "/api/plugins/again")).status).toBe(204);
    }
  }, 60_000);
});

describe("a plugin outside the runtime (docs/wire-contract.md)", () => {
  it("is dispatched to whoever serves its subject with a plain NATS client", async () => {
    const bytes = await codePlugin(
      work,
      signer,
      "outside",
      "// served elsewhere\n",
      [{ method: "POST", path: "/echo/:word", handler: "echo", permission: "outside.echo.execute" }],
      { runtime: "external", permissions: ["outside.echo.execute"] },
    );
    expect((await install(bytes)).status).toBe(201);
    expect((await asOperator("POST", "/api/plugins/outside/activate")).status).toBe(200);
    const nc = await connect(h.natsOptions());
    const seen: unknown[] = [];
    const sub = nc.subscribe(`${h.env.SVC_SUBJECT_PREFIX}.plugins.outside.http`, {
      queue: "plugin.outside",
      callback: (_err, msg) => {
        const request = msg.json<{
          params: { word: string };
          body: unknown;
          principal: { subject: string };
        }>();
        seen.push(request);
        // Any client on the subject may answer anything: a reply that is not one is the plugin's fault.
        if (request.params.word === "bad") {
          msg.respond(JSON.stringify({ status: "teapot", headers: { "x-n": 1 } }));
          return;
        }
        msg.respond(
          JSON.stringify({
            status: 201,
            headers: { "x-echo": "1" },
            body: { word: request.params.word, body: request.body },
          }),
        );
      },
    });
    try {
      const holder = await mintToken({ scope: "platform", permissions: ["outside.echo.execute"] });
      const answer = await eventually(
        () => api("POST", "/api/plugins/outside/echo/hi", holder, { n: 1 }),
        (r) => r.status !== 404,
      );
      expect(answer.status, answer.text).toBe(201);
      expect(answer.headers["x-echo"]).toBe("1");
      expect(answer.json()).toEqual({ word: "hi", body: { n: 1 } });
      expect(seen[0]).toMatchObject({ route: { handler: "echo" }, path: "/echo/hi" });
      const bad = await api("POST", "/api/plugins/outside/echo/bad", holder, {});
      expect(bad.status, bad.text).toBe(502);
      expect(bad.json()).toMatchObject({
        type: expect.stringContaining("plugin-failed"),
        pluginId: "outside",
      });
      const nobody = await mintToken({ scope: "platform", permissions: [] });
      expect((await api("POST", "/api/plugins/outside/echo/hi", nobody, {})).json()).toMatchObject({
        missingPermission: "outside.echo.execute",
      });
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
    // Nobody serving it: a clear 503, not a hang.
    const holder = await mintToken({ scope: "platform", permissions: ["outside.echo.execute"] });
    const none = await api("POST", "/api/plugins/outside/echo/hi", holder, {});
    expect(none.status).toBe(503);
    expect((await asOperator("DELETE", "/api/plugins/outside")).status).toBe(204);
  });
});

describe("plugin keys in workspace sessions", () => {
  it("carries the plugin's keys only while it is active and in the workspace's chain", async () => {
    const user = (
      await asOperator("POST", "/api/users", { userName: "wanda", password: "wanda's long password" })
    ).json<{ id: string }>();
    expect((await asOperator("PUT", `/api/workspaces/ws-hello/members/${user.id}`)).status).toBe(201);
    expect(
      (
        await asOperator("PUT", "/api/rbac/roles/hello-admin", {
          permissions: ["webhook.read", "hello.greeting.read"],
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await asOperator("PUT", `/api/workspaces/ws-hello/members/${user.id}/roles`, {
          roles: ["hello-admin"],
        })
      ).status,
    ).toBe(200);
    const keys = async () => {
      const r = await signIn(base, {
        username: "wanda",
        password: "wanda's long password",
        workspaceKey: "ws-hello",
      });
      expect(r.status).toBe(200);
      return decodeJwt(r.json<{ accessToken: string }>().accessToken).permission as string[];
    };
    expect(await keys()).toEqual(["webhook.read"]);

    // Not entitled: it cannot join the chain.
    const unentitled = await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: ["hello"] });
    expect(unentitled.status).toBe(400);
    expect(unentitled.json()).toMatchObject({
      errors: [{ field: "/body/chain/0", message: expect.stringContaining("not entitled") }],
    });
    const granted = await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "acme", pluginId: "hello", entitled: true }],
    });
    expect(granted.json()).toEqual({ granted: 1, withdrawn: 0 });

    // In the chain but inactive: nothing.
    const chain = await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: ["hello"] });
    expect(chain.status, chain.text).toBe(200);
    expect(chain.json()).toMatchObject({
      workspaceKey: "ws-hello",
      chain: [{ pluginId: "hello", position: 0 }],
    });
    expect((await asOperator("GET", "/api/workspaces/ws-hello/plugins")).json()).toMatchObject({
      chain: [{ pluginId: "hello" }],
    });
    expect(await keys()).toEqual(["webhook.read"]);

    // Active and in the chain: its keys join the session.
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    expect(await eventually(keys, (k) => k.includes("hello.greeting.read"))).toEqual([
      "hello.greeting.read",
      "webhook.read",
    ]);
    // In the chain but inactive: nothing (seen leaving, not assumed after a pause).
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
    expect(await eventually(keys, (k) => !k.includes("hello.greeting.read"))).toEqual(["webhook.read"]);
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    expect(await eventually(keys, (k) => k.includes("hello.greeting.read"))).toContain("hello.greeting.read");

    // Out of the chain again: gone, though still active.
    expect((await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: [] })).status).toBe(200);
    expect(await eventually(keys, (k) => !k.includes("hello.greeting.read"))).toEqual(["webhook.read"]);

    // Back in the chain; then the tenant's entitlement is withdrawn: gone, and the chain says why.
    expect((await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: ["hello"] })).status).toBe(
      200,
    );
    expect(await eventually(keys, (k) => k.includes("hello.greeting.read"))).toContain("hello.greeting.read");
    expect(
      (
        await asOperator("PUT", "/api/entitlements", {
          items: [{ tenantKey: "acme", pluginId: "hello", entitled: false }],
        })
      ).json(),
    ).toEqual({ granted: 0, withdrawn: 1 });
    expect(await eventually(keys, (k) => !k.includes("hello.greeting.read"))).toEqual(["webhook.read"]);
    expect((await asOperator("GET", "/api/workspaces/ws-hello/plugins")).json()).toMatchObject({
      tenantKey: "acme",
      chain: [{ pluginId: "hello", entitled: false }],
    });
    // A grant to the workspace itself brings it back; then deactivation takes the keys away.
    await asOperator("PUT", "/api/entitlements", {
      items: [{ workspaceKey: "ws-hello", pluginId: "hello", entitled: true }],
    });
    expect(await eventually(keys, (k) => k.includes("hello.greeting.read"))).toContain("hello.greeting.read");
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
    expect(await eventually(keys, (k) => !k.includes("hello.greeting.read"))).toEqual(["webhook.read"]);

    // An unknown plugin cannot join a chain.
    const bad = await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: ["hello", "ghost"] });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ errors: [{ field: "/body/chain/1" }] });
  });
});

describe("plugin routes and the chain", () => {
  it("serve a workspace session only where the plugin is in its workspace's chain and entitled", async () => {
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    await asOperator("PUT", "/api/entitlements", {
      items: [{ workspaceKey: "ws-hello", pluginId: "hello", entitled: true }],
    });
    expect((await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: ["hello"] })).status).toBe(
      200,
    );
    const inChain = await mintToken({ scope: "workspace", workspaceKey: "ws-hello", permissions: [] });
    // ws-other's chain lacks it, and its tenant is not entitled.
    const elsewhere = await mintToken({ scope: "workspace", workspaceKey: "ws-other", permissions: ["*"] });
    const platform = await mintToken({ scope: "platform", permissions: [] });
    const call = (token: string) => api("GET", "/api/plugins/hello/greeting?name=Ada", token);
    // The route table follows the registry's broadcast: wait until the workspace session sees `status`.
    const inChainSees = async (status: number) =>
      (
        await eventually(
          () => call(inChain),
          (r) => r.status === status,
        )
      ).status;
    expect(await inChainSees(200)).toBe(200);
    expect((await call(platform)).status).toBe(200);
    const refused = await call(elsewhere);
    expect(refused.status).toBe(404);
    // The same 404 as a plugin that does not exist: nothing to enumerate.
    const ghost = await api("GET", "/api/plugins/ghost/greeting", elsewhere);
    expect(refused.json<{ detail: string }>().detail).toBe(
      ghost.json<{ detail: string }>().detail.replace("ghost", "hello"),
    );
    // Out of the chain: gone for the workspace session too.
    expect((await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: [] })).status).toBe(200);
    expect(await inChainSees(404)).toBe(404);
    expect((await call(platform)).status).toBe(200);
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
  });
});

describe("entitlements and delegations", () => {
  it("answers through what a workspace or tenant is entitled, and syncs one source's full list", async () => {
    const ws = await asOperator("GET", "/api/workspaces/ws-other/entitlements/hello");
    expect(ws.status, ws.text).toBe(200);
    expect(ws.json()).toEqual({
      workspaceKey: "ws-other",
      tenantKey: "other",
      pluginId: "hello",
      entitled: false,
      via: null,
      expiresAtUtc: null,
    });
    expect((await asOperator("GET", "/api/workspaces/nowhere/entitlements/hello")).status).toBe(404);
    expect((await asOperator("GET", "/api/tenants/nobody/entitlements/hello")).status).toBe(404);

    // A billing system's full list: tenant `other` until a date, and one workspace.
    const until2099 = "2099-01-01T00:00:00.000Z";
    const first = await asOperator("POST", "/api/entitlements/sync", {
      source: "billing",
      items: [
        { tenantKey: "other", pluginId: "hello", expiresAtUtc: until2099 },
        { workspaceKey: "ws-hello", pluginId: "telephony" },
      ],
    });
    expect(first.status, first.text).toBe(200);
    expect(first.json()).toEqual({ source: "billing", added: 2, removed: 0, kept: 0 });
    expect((await asOperator("GET", "/api/tenants/other/entitlements/hello")).json()).toEqual({
      tenantKey: "other",
      pluginId: "hello",
      entitled: true,
      via: "tenant",
      expiresAtUtc: until2099,
    });
    expect((await asOperator("GET", "/api/workspaces/ws-other/entitlements/hello")).json()).toMatchObject({
      entitled: true,
      via: "tenant",
    });
    // The next list drops the workspace grant and keeps the tenant's.
    const second = await asOperator("POST", "/api/entitlements/sync", {
      source: "billing",
      items: [{ tenantKey: "other", pluginId: "hello", expiresAtUtc: until2099 }],
    });
    expect(second.json()).toEqual({ source: "billing", added: 0, removed: 1, kept: 1 });
    const listed = await asOperator("GET", "/api/entitlements?source=billing");
    expect(listed.json()).toEqual({
      items: [
        expect.objectContaining({
          tenantKey: "other",
          workspaceKey: null,
          pluginId: "hello",
          source: "billing",
        }),
      ],
      nextCursor: null,
    });
    // An expired grant entitles nobody.
    await asOperator("PUT", "/api/entitlements", {
      items: [
        {
          workspaceKey: "ws-other",
          pluginId: "lapsed",
          entitled: true,
          expiresAtUtc: "2001-01-01T00:00:00Z",
        },
      ],
    });
    expect((await asOperator("GET", "/api/workspaces/ws-other/entitlements/lapsed")).json()).toMatchObject({
      entitled: false,
    });
    // Bad grants are listed, each with its field.
    const bad = await asOperator("PUT", "/api/entitlements", {
      items: [
        { tenantKey: "other", workspaceKey: "ws-other", pluginId: "hello", entitled: true },
        { tenantKey: "ghost", pluginId: "hello", entitled: true },
      ],
    });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ errors: [{ field: "/body/items/0" }] });
    const ghost = await asOperator("PUT", "/api/entitlements", {
      items: [{ tenantKey: "ghost", pluginId: "hello", entitled: true }],
    });
    expect(ghost.json()).toMatchObject({ errors: [{ field: "/body/items/0/tenantKey" }] });
    // Entitlement writes are for platform sessions only.
    const scoped = await mintToken({
      scope: "workspace",
      workspaceKey: "ws-other",
      permissions: ["plugin.execute"],
    });
    expect((await api("PUT", "/api/entitlements", scoped, { items: [] })).status).toBe(403);
  });

  it("lets a tenant's own admin put only delegated plugins in its workspace's chain", async () => {
    const admin = await mintToken({
      scope: "workspace",
      workspaceKey: "ws-other",
      permissions: ["plugin.assign"],
    });
    // Entitled (through the billing grant above) but not delegated.
    const refused = await api("PUT", "/api/workspaces/ws-other/plugins", admin, { chain: ["hello"] });
    expect(refused.status).toBe(400);
    expect(refused.json()).toMatchObject({ errors: [{ message: expect.stringContaining("not delegated") }] });
    const delegated = await asOperator("PUT", "/api/tenants/other/plugins/hello/delegation", {
      delegated: true,
    });
    expect(delegated.json()).toMatchObject({ tenantKey: "other", pluginId: "hello", delegated: true });
    expect((await asOperator("GET", "/api/tenants/other/plugins/delegations")).json()).toMatchObject({
      tenantKey: "other",
      items: [{ pluginId: "hello", delegated: true }],
    });
    expect((await api("PUT", "/api/workspaces/ws-other/plugins", admin, { chain: ["hello"] })).status).toBe(
      200,
    );
    // Its reach is its own workspace only.
    expect((await api("PUT", "/api/workspaces/ws-hello/plugins", admin, { chain: [] })).status).toBe(404);
    expect((await api("PUT", "/api/workspaces/ws-other/plugins", admin, { chain: [] })).status).toBe(200);
    expect(
      (await asOperator("PUT", "/api/tenants/other/plugins/hello/delegation", { delegated: false })).json(),
    ).toMatchObject({ delegated: false });
  });
});

describe("the plugin audit and reach", () => {
  it("shows a workspace session only the entries about its own workspace", async () => {
    // Entries exist for the platform (installs, activations) and for two workspaces' chains.
    expect((await asOperator("PUT", "/api/workspaces/ws-hello/plugins", { chain: ["hello"] })).status).toBe(
      200,
    );
    expect((await asOperator("PUT", "/api/workspaces/ws-other/plugins", { chain: [] })).status).toBe(200);
    type Audit = { items: Array<{ action: string }> };
    const all = (await asOperator("GET", "/api/plugins/audit?limit=100")).json<Audit>();
    expect(all.items.some((a) => a.action.startsWith("assign ws-hello"))).toBe(true);
    expect(all.items.some((a) => a.action === "install")).toBe(true);
    const reader = await mintToken({
      scope: "workspace",
      workspaceKey: "ws-other",
      permissions: ["plugin.read"],
    });
    const own = (await api("GET", "/api/plugins/audit?limit=100", reader)).json<Audit>();
    expect(own.items.length).toBeGreaterThan(0);
    expect(own.items.every((a) => a.action.startsWith("assign ws-other"))).toBe(true);
  });
});

describe("events from plugins", () => {
  it("reach a webhook receiver through the decorated publisher, the sensitive field masked", async () => {
    const sub = await asOperator("POST", "/api/webhooks", {
      eventName: "hello.greeted",
      targetUrl: receiver.url,
      secret: "s3cret-value",
    });
    expect(sub.status, sub.text).toBe(201);
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    const sent = await eventually(
      () =>
        asOperator("POST", "/api/plugins/hello/greetings", { to: "Grace", greeting: "Top secret greeting" }),
      (r) => r.status === 202,
    );
    expect(sent.json()).toMatchObject({ published: "hello.greeted" });
    await receiver.waitFor(1, 15_000);
    const delivered = JSON.parse(receiver.received[0]?.body ?? "{}") as {
      event: string;
      data: Record<string, unknown>;
    };
    expect(delivered.event).toBe("hello.greeted");
    // The decorator added `source`; `greeting` is a sensitive field the plugin declared.
    expect(delivered.data).toEqual({ to: "Grace", greeting: "Top***ng", source: "hello" });
    // What registry.json's eventSchemas says of the event describes it (checked by Ajv, not by us).
    const described = (await asOperator("GET", "/api/events/catalog"))
      .json<Array<{ eventName: string; schema: object; example: unknown }>>()
      .find((e) => e.eventName === "hello.greeted");
    const ajv = new Ajv({ strict: false });
    expect(ajv.validate(described?.schema ?? false, delivered.data), ajv.errorsText()).toBe(true);
    expect(ajv.validate(described?.schema ?? false, described?.example)).toBe(true);
    // Not into a workspace whose chain lacks the plugin (ws-other's is empty): the host
    // refuses the publish, so the plugin's handler fails and the caller gets 502.
    const elsewhere = await asOperator("POST", "/api/plugins/hello/greetings", {
      to: "Mallory",
      workspaceKey: "ws-other",
    });
    expect(elsewhere.status).toBe(502);
    expect(elsewhere.json()).toMatchObject({ code: "SVC_PLUGIN_FAILED" });
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
  });
});

describe("a plugin cannot reach the host's secrets", () => {
  it("a signed probe plugin's reads of /proc, other files and other plugins, writes and processes fail", async () => {
    const code = `
const fs = process.getBuiltinModule("node:fs");
const attempt = (f) => { try { f(); return "allowed"; } catch (e) { return e.code ?? e.message; } };
export class Plugin {
  probe(request) {
    const cache = ${JSON.stringify(join(work, "cache"))};
    const others = attempt(() => fs.readdirSync(cache));
    return {
      registryEnviron: attempt(() => fs.readFileSync("/proc/" + process.ppid + "/environ")),
      registryCmdline: attempt(() => fs.readFileSync("/proc/" + process.ppid + "/cmdline")),
      passwd: attempt(() => fs.readFileSync("/etc/passwd")),
      cacheListing: others,
      ownFile: attempt(() => fs.readFileSync(new URL("./registry.json", import.meta.url))),
      write: attempt(() => fs.writeFileSync(new URL("./x", import.meta.url), "x")),
      spawn: attempt(() => process.getBuiltinModule("node:child_process").execFileSync("/bin/true")),
      env: Object.keys(process.env).length,
    };
  }
}`;
    const bytes = await codePlugin(work, signer, "probe", code, [
      { method: "GET", path: "/probe", handler: "probe" },
    ]);
    expect((await install(bytes)).status).toBe(201);
    expect((await asOperator("POST", "/api/plugins/probe/activate")).status).toBe(200);
    const answer = await eventually(
      () => asOperator("GET", "/api/plugins/probe/probe"),
      (r) => r.status === 200,
    );
    expect(answer.json()).toEqual({
      registryEnviron: "ERR_ACCESS_DENIED",
      registryCmdline: "ERR_ACCESS_DENIED",
      passwd: "ERR_ACCESS_DENIED",
      cacheListing: "ERR_ACCESS_DENIED",
      ownFile: "allowed",
      write: "ERR_ACCESS_DENIED",
      spawn: "ERR_ACCESS_DENIED",
      env: 0,
    });
    expect((await asOperator("POST", "/api/plugins/probe/deactivate")).status).toBe(200);
    expect((await asOperator("DELETE", "/api/plugins/probe")).status).toBe(204);
  });
});

describe("containment (ADR 0007)", () => {
  it("keeps the service answering while plugins throw, loop, exhaust memory, exit and crash later", async () => {
    const bytes = await codePlugin(work, signer, "rogue", MISBEHAVING, MISBEHAVING_ROUTES);
    expect((await install(bytes)).status).toBe(201);
    const activate = async () => {
      const r = await asOperator("POST", "/api/plugins/rogue/activate");
      expect(r.status, r.text).toBe(200);
      await eventually(
        () => asOperator("GET", "/api/plugins/rogue/ok"),
        (x) => x.status === 200,
      );
    };
    await activate();

    // A handler that throws is the caller's 502; the plugin's message is not shown, and it keeps running.
    const thrown = await asOperator("GET", "/api/plugins/rogue/throws");
    expect(thrown.status).toBe(502);
    expect(thrown.json()).toMatchObject({ code: "SVC_PLUGIN_FAILED" });
    expect(thrown.text).not.toContain("secret detail");
    expect((await asOperator("GET", "/api/plugins/rogue/ok")).status).toBe(200);

    const cases: Array<[string, RegExp]> = [
      ["spin", /stopped answering/],
      ["hog", /memory/],
      // One array grown past the heap limit: this aborts a worker thread's whole process on Node 20.
      ["grow", /memory/],
      ["exit", /exited/],
      ["later", /crashed/],
    ];
    for (const [route, reason] of cases) {
      const started = Date.now();
      const misbehaving = asOperator("GET", `/api/plugins/rogue/${route}`);
      // Meanwhile the platform answers other requests.
      const other = await asOperator("GET", "/api/plugins/installed");
      expect(other.status).toBe(200);
      const answer = await misbehaving;
      expect([200, 502, 503, 504]).toContain(answer.status);
      const failed = await eventually(
        () => stateOf("rogue"),
        (p) => p?.state === "failed",
        10_000,
      );
      expect(failed, route).toMatchObject({ state: "failed", failureReason: expect.stringMatching(reason) });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(
        (
          await eventually(
            () => asOperator("GET", "/api/plugins/rogue/ok"),
            (x) => x.status === 404,
          )
        ).status,
      ).toBe(404);
      await activate();
    }
    const audit = (await asOperator("GET", "/api/plugins/audit?limit=100")).json<{
      items: Array<{ action: string; pluginId: string; outcome: string }>;
    }>();
    expect(audit.items.filter((a) => a.action === "fail" && a.pluginId === "rogue").length).toBe(5);
    const metrics = await http(`${base}/metrics`);
    expect(metrics.text).toMatch(/svc_plugin_runtime_failures_total\{cause="hang"[^}]*\} 1/);
    expect((await asOperator("DELETE", "/api/plugins/rogue")).status).toBe(204);
  });
});

describe("a plugin activated by a request", () => {
  it("publishes into a workspace and has its failure recorded long after that request's deadline", async () => {
    // A gateway whose requests have 2 s: the activation's deadline is long past when the plugin acts.
    const short = (await h.start(gatewayService, { ...env, BackendHost__RequestTimeoutMs: "2000" })).hooks
      .httpAddress as string;
    await h.sql(
      `INSERT INTO resolver.workspaces (key, tenant_key, name) VALUES ('ws-later', 'acme', 'Later')`,
    );
    const bytes = await codePlugin(
      work,
      signer,
      "later",
      `export class Plugin {
        constructor(host) { this.host = host; }
        async publish(request) {
          await this.host.events.publish("later.happened", request.body.workspaceKey, { n: 1 });
          return { status: 202 };
        }
        crash() { setTimeout(() => { throw new Error("a late crash"); }, 10); return { status: 202 }; }
      }`,
      [
        { method: "POST", path: "/publish", handler: "publish" },
        { method: "POST", path: "/crash", handler: "crash" },
      ],
      { events: ["later.happened"] },
    );
    expect((await install(bytes)).status).toBe(201);
    const granted = await asOperator("PUT", "/api/entitlements", {
      items: [{ workspaceKey: "ws-later", pluginId: "later", entitled: true }],
    });
    expect(granted.status, granted.text).toBe(200);
    expect((await asOperator("PUT", "/api/workspaces/ws-later/plugins", { chain: ["later"] })).status).toBe(
      200,
    );
    // Each activation takes a started process and starts a spare in its place, within its request: the
    // third runs in a process started during an earlier activation's request.
    const viaShort = bearerApi(() => short);
    let lastDeadline = 0;
    for (const round of [1, 2, 3]) {
      lastDeadline = Date.now() + 2_000;
      const activated = await viaShort("POST", "/api/plugins/later/activate", operator);
      expect(activated.status, activated.text).toBe(200);
      if (round < 3)
        expect((await viaShort("POST", "/api/plugins/later/deactivate", operator)).status).toBe(200);
    }
    // Until the last activation's deadline has passed (whatever of it the activations took already).
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, lastDeadline + 200 - Date.now())));

    // Publishing into the workspace asks the database whether the chain holds the plugin: outside any
    // request's deadline, not refused as late.
    const published = await asOperator("POST", "/api/plugins/later/publish", { workspaceKey: "ws-later" });
    expect(published.status, published.text).toBe(202);
    // Its process's end is recorded (the database write is not refused as late either).
    expect((await asOperator("POST", "/api/plugins/later/crash", {})).status).toBe(202);
    const failed = await eventually(
      () => stateOf("later"),
      (p) => p?.state === "failed",
      10_000,
    );
    expect(failed).toMatchObject({ state: "failed", failureReason: expect.stringContaining("a late crash") });
    expect((await asOperator("DELETE", "/api/plugins/later")).status).toBe(204);
  });
});
