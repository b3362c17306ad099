/**
 * Members come from within reach, and operators' decisions stick.
 *
 * The attacks: a workspace admin added a user of another tenant (and a platform operator) to its workspace
 * with `PUT /api/workspaces/{wk}/members/{userId}`, then read their e-mail and global role, and a real id
 * answered 201 where a random one answered 404; a workspace admin turned its workspace back on after an
 * operator deactivated it; a suspended tenant's workspaces still signed in and worked.
 */
import { randomUUID } from "node:crypto";

import { SYSTEM_ROLES } from "@svc/access";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
let base: string;
let operator: string;
const ids: Record<string, string> = {};

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);
const login = (username: string, workspaceKey?: string) =>
  signIn(base, { username, password: `${username}-long-password`, workspaceKey });
const adminKeys = SYSTEM_ROLES.find((r) => r.name === "admin")?.permissions ?? [];
/** A workspace admin's session, as sign-in gives it (the admin role's keys, plus workspace.update). */
const workspaceAdmin = (workspaceKey: string) =>
  mintToken({
    scope: "workspace",
    workspaceKey,
    roles: ["admin"],
    permissions: [...adminKeys, "workspace.update", "workspace.read"],
  });

const receiver = new Receiver();

afterAll(async () => {
  await h.stopAll();
  await receiver.stop();
});
beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
    BackendHost__JobPollIntervalMs: "100",
    BackendHost__PausedWorkspaceRetryMs: "300",
  };
  await receiver.start();
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(webhookDispatcherService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  for (const tenantKey of ["north", "south"]) {
    expect((await asOperator("POST", "/api/tenants", { tenantKey, name: tenantKey })).status).toBe(201);
  }
  for (const [key, tenantKey] of [
    ["north-a", "north"],
    ["north-b", "north"],
    ["south-a", "south"],
  ] as const) {
    expect((await asOperator("PUT", `/api/workspaces/${key}`, { tenantKey, name: key })).status).toBe(201);
  }
  // alice: a member of north-a; bob: of north-b (same tenant); carol: of south-a; ops: a platform operator
  // (a global role; a workspace-scope role such as admin is no global role).
  for (const [name, workspace, role] of [
    ["alice", "north-a", null],
    ["bob", "north-b", null],
    ["carol", "south-a", null],
    ["ops", null, "host.api"],
  ] as const) {
    const created = await asOperator("POST", "/api/users", {
      userName: name,
      password: `${name}-long-password`,
      email: `${name}@example.test`,
    });
    expect(created.status, created.text).toBe(201);
    ids[name] = created.json<{ id: string }>().id;
    if (workspace !== null) {
      expect((await asOperator("PUT", `/api/workspaces/${workspace}/members/${ids[name]}`)).status).toBe(201);
    }
    if (role !== null)
      expect((await asOperator("PUT", `/api/rbac/users/${ids[name]}`, { role })).status).toBe(200);
  }
});

describe("members come from within reach", () => {
  it("a workspace admin cannot add another tenant's user, a platform operator or an unknown id, and cannot tell them apart", async () => {
    const admin = await workspaceAdmin("north-a");
    const answers = [];
    for (const userId of [ids.carol, ids.ops, randomUUID()]) {
      const refused = await api("PUT", `/api/workspaces/north-a/members/${userId}`, admin);
      expect(refused.status, String(userId)).toBe(404);
      answers.push(refused.json<{ detail: string }>().detail.replace(String(userId), "<id>"));
    }
    expect(new Set(answers).size).toBe(1);
    const members = await api("GET", "/api/workspaces/north-a/members", admin);
    const names = members.json<{ items: Array<{ userName: string }> }>().items.map((u) => u.userName);
    expect(names).toEqual(["alice"]);
  });

  it("a workspace admin adds a user of its own tenant; a platform session adds anyone", async () => {
    const admin = await workspaceAdmin("north-a");
    expect((await api("PUT", `/api/workspaces/north-a/members/${ids.bob}`, admin)).status).toBe(201);
    expect((await api("PUT", `/api/workspaces/north-a/members/${ids.bob}`, admin)).status).toBe(200);
    expect((await asOperator("PUT", `/api/workspaces/south-a/members/${ids.alice}`)).status).toBe(201);
    expect((await asOperator("DELETE", `/api/workspaces/south-a/members/${ids.alice}`)).status).toBe(204);
  });

  it("refuses a membership in a workspace that does not exist", async () => {
    const refused = await asOperator("PUT", `/api/workspaces/no-such-workspace/members/${ids.alice}`);
    expect(refused.status).toBe(404);
    expect(refused.json<{ detail: string }>().detail).toMatch(/no-such-workspace/);
    const rows = await h.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM rbac.memberships WHERE workspace_key = 'no-such-workspace'`,
    );
    expect(rows[0]?.n).toBe(0);
  });
});

describe("operators' decisions stick", () => {
  it("isActive is platform-only: a workspace admin cannot turn its workspace back on", async () => {
    const off = await asOperator("PUT", "/api/workspaces/north-b", {
      tenantKey: "north",
      name: "north-b",
      isActive: false,
    });
    expect(off.json<{ isActive: boolean }>().isActive).toBe(false);
    const admin = await workspaceAdmin("north-b");
    // A workspace admin's own request is refused while the workspace is off, whatever it asks.
    const on = await api("PUT", "/api/workspaces/north-b", admin, {
      tenantKey: "north",
      name: "x",
      isActive: true,
    });
    expect(on.status).toBe(403);
    expect((await asOperator("GET", "/api/workspaces/north-b")).json<{ isActive: boolean }>().isActive).toBe(
      false,
    );
    // A rename by the platform that leaves isActive out keeps the operator's decision.
    await asOperator("PUT", "/api/workspaces/north-b", { tenantKey: "north", name: "renamed" });
    expect((await asOperator("GET", "/api/workspaces/north-b")).json<{ isActive: boolean }>().isActive).toBe(
      false,
    );
    expect(
      (
        await asOperator("PUT", "/api/workspaces/north-b", {
          tenantKey: "north",
          name: "north-b",
          isActive: true,
        })
      ).status,
    ).toBe(200);
    // With the workspace on, the admin may edit it but still not switch it.
    const flip = await api("PUT", "/api/workspaces/north-b", admin, {
      tenantKey: "north",
      name: "x",
      isActive: false,
    });
    expect(flip.status).toBe(403);
    expect(flip.json()).toMatchObject({ rule: "platform-only-field", field: "/body/isActive" });
    const rename = await api("PUT", "/api/workspaces/north-b", admin, {
      tenantKey: "north",
      name: "by-admin",
    });
    expect(rename.status, rename.text).toBe(200);
    expect(rename.json<{ isActive: boolean }>().isActive).toBe(true);
  });

  it("a deactivated workspace refuses sign-in and every request of its sessions, until it is turned on", async () => {
    const signedIn = await login("alice", "north-a");
    expect(signedIn.status, signedIn.text).toBe(200);
    const token = signedIn.json<{ accessToken: string }>().accessToken;
    const admin = await workspaceAdmin("north-a");
    expect((await api("GET", "/api/workspaces/north-a", admin)).status).toBe(200);

    await asOperator("PUT", "/api/workspaces/north-a", {
      tenantKey: "north",
      name: "north-a",
      isActive: false,
    });
    await until(async () => (await api("GET", "/api/workspaces/north-a", admin)).status === 403);
    const refused = await api("GET", "/api/workspaces/north-a/members", token);
    expect(refused.status).toBe(403);
    expect(refused.json()).toMatchObject({ rule: "workspace-inactive" });
    const again = await login("alice", "north-a");
    expect(again.status).toBe(403);
    expect(again.json()).toMatchObject({ rule: "workspace-inactive" });
    // A wrong password still gets the uniform sign-in failure: the state is told only to a member.
    const wrong = await signIn(base, {
      username: "alice",
      password: "not-her-password",
      workspaceKey: "north-a",
    });
    expect(wrong.status).toBe(401);

    await asOperator("PUT", "/api/workspaces/north-a", {
      tenantKey: "north",
      name: "north-a",
      isActive: true,
    });
    await until(async () => (await api("GET", "/api/workspaces/north-a", admin)).status === 200);
    expect((await login("alice", "north-a")).status).toBe(200);
  });

  it("a suspended tenant's workspaces refuse sign-in and requests; platform sessions still manage them", async () => {
    expect((await login("carol", "south-a")).status).toBe(200);
    const admin = await workspaceAdmin("south-a");
    const hook = await asOperator("POST", "/api/webhooks", {
      eventName: "workspace.member-assigned",
      targetUrl: receiver.url,
      secret: "south-secret-value",
      workspaceKey: "south-a",
    });
    expect(hook.status, hook.text).toBe(201);
    expect((await asOperator("POST", "/api/tenants/south/suspend")).status).toBe(200);
    await until(async () => (await api("GET", "/api/workspaces/south-a", admin)).status === 403);
    expect((await api("GET", "/api/workspaces/south-a", admin)).json()).toMatchObject({
      rule: "tenant-suspended",
    });
    const refused = await login("carol", "south-a");
    expect(refused.status).toBe(403);
    expect(refused.json()).toMatchObject({ rule: "tenant-suspended" });
    expect((await asOperator("GET", "/api/workspaces/south-a")).status).toBe(200);
    // The tenant's deliveries wait: an event raised now (by the platform) is not delivered while suspended.
    expect((await asOperator("PUT", `/api/workspaces/south-a/members/${ids.bob}`)).status).toBe(201);
    const waiting = async () =>
      (
        await h.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'webhook.deliver' AND last_error LIKE '%suspended%'`,
        )
      )[0]?.n ?? 0;
    // Its attempt ran and was put off (written back with the reason), not delivered.
    await until(async () => (await waiting()) > 0);
    expect(receiver.received).toHaveLength(0);
    expect((await asOperator("POST", "/api/tenants/south/activate")).status).toBe(200);
    await receiver.waitFor(1);
    expect(JSON.parse(receiver.received[0]?.body ?? "{}")).toMatchObject({
      event: "workspace.member-assigned",
      workspaceKey: "south-a",
    });
    await until(async () => (await api("GET", "/api/workspaces/south-a", admin)).status === 200);
    expect((await login("carol", "south-a")).status).toBe(200);
  });
});
