/**
 * The flow routes through their contract, with the flow table in memory: no NATS, no PostgreSQL. What the
 * routes promise: a workspace session makes, sees and changes only its own workspace's flows (another's
 * is as if it did not exist), a workspace holds at most the configured number, an http action's secret is
 * sealed and never shown (a PUT without it keeps it for the same URL), a flow publishes only what it may,
 * and what is refused is never written.
 */
import { randomBytes } from "node:crypto";

import type { Principal } from "@svc/bus";
import { caller, callRoute, type PluginContribution, webhookRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import {
  createFlow,
  deleteFlow,
  type FlowRepository,
  type FlowRow,
  listFlows,
  type NewFlow,
  replaceFlow,
} from "./flows.js";
import { createTargetPolicy } from "./http-client.js";
import { PluginEventScopes } from "./plugin-contributions.js";
import { createSecretBox } from "./secrets.js";

/** The table's answers as the SQL gives them; `writes` counts the changes made. */
class MemoryFlows implements FlowRepository {
  readonly rows: FlowRow[] = [];
  writes = 0;
  private clock = Date.parse("2026-11-27T10:00:00.000Z");

  async insert(f: NewFlow, max: number) {
    const count = this.rows.filter((r) => r.workspace_key === f.workspaceKey).length;
    if (count >= max) return { count };
    this.writes++;
    const row: FlowRow = {
      id: crypto.randomUUID(),
      ...this.columns(f),
      created_at: new Date((this.clock += 1_000)),
      updated_at: new Date(this.clock),
    };
    this.rows.push(row);
    return { row };
  }

  async update(id: string, within: string | null, change: (current: FlowRow) => NewFlow) {
    const row = this.lookup(id, within);
    if (row === undefined) return null;
    const next = this.columns(change(structuredClone(row)));
    this.writes++;
    return Object.assign(row, next, { updated_at: new Date((this.clock += 1_000)) });
  }

  async remove(id: string, within: string | null) {
    const row = this.lookup(id, within);
    if (row === undefined) return false;
    this.writes++;
    this.rows.splice(this.rows.indexOf(row), 1);
    return true;
  }

  async page(workspaceKey: string | null, page: { limit: number; after: string[] | null }) {
    const key = (r: FlowRow) => [r.created_at.toISOString().replace("Z", "000Z"), r.id].join();
    return this.rows
      .filter((r) => workspaceKey === null || r.workspace_key === workspaceKey)
      .map((r) => ({ ...r, created_at_us: r.created_at.toISOString().replace("Z", "000Z") }))
      .sort((a, b) => (key(b) < key(a) ? -1 : 1))
      .filter((r) => page.after === null || key(r) < page.after.join())
      .slice(0, page.limit + 1);
  }

  async knownPatterns() {
    return new Set(["user.created", "user.*"]);
  }

  private columns(f: NewFlow) {
    return {
      name: f.name,
      workspace_key: f.workspaceKey,
      event_name: f.eventName,
      // As the jsonb column gives it back: a copy.
      actions: structuredClone([...f.actions]),
      is_active: f.isActive,
    };
  }

  private lookup(id: string, within: string | null) {
    return this.rows.find((r) => r.id === id && (within === null || r.workspace_key === within));
  }
}

const secrets = createSecretBox(randomBytes(32).toString("base64"));
const allowed = createTargetPolicy([]);
const scopes = new PluginEventScopes();
scopes.apply([
  { pluginId: "hello", events: ["hello.greeted"], workspaces: ["alpha"] } as unknown as PluginContribution,
]);
const MAX = 3;

const operator = caller(["flow.read", "flow.manage"]);
const session = (workspaceKey: string, permissions = ["flow.read", "flow.manage"]): Principal => ({
  subject: `admin-${workspaceKey}`,
  scope: "workspace",
  workspaceKey,
  permissions,
  roles: ["admin"],
});

function routes(tables: MemoryFlows) {
  return {
    create: (principal: Principal, body: Record<string, unknown>) =>
      callRoute(
        webhookRoutes["flows.create"],
        (req) => createFlow(tables, secrets, allowed, scopes, MAX, req),
        { principal, params: {}, query: {}, body } as never,
      ),
    list: (principal: Principal, query: Record<string, unknown> = {}) =>
      callRoute(webhookRoutes["flows.list"], (req) => listFlows(tables, req), {
        principal,
        params: {},
        query,
        body: null,
      }),
    replace: (principal: Principal, id: string, body: Record<string, unknown>) =>
      callRoute(webhookRoutes["flows.put"], (req) => replaceFlow(tables, secrets, allowed, scopes, req), {
        principal,
        params: { id },
        query: {},
        body,
      } as never),
    remove: (principal: Principal, id: string) =>
      callRoute(webhookRoutes["flows.delete"], (req) => deleteFlow(tables, req), {
        principal,
        params: { id },
        query: {},
        body: null,
      }),
  };
}

const http = (url = "https://crm.example.com/hooks", secret?: string) => ({
  type: "http",
  url,
  ...(secret === undefined ? {} : { secret }),
});
const flow = (actions: unknown[] = [http("https://crm.example.com/hooks", "a flow secret")]) => ({
  name: "Welcome",
  eventName: "user.created",
  actions,
});

describe("flows", () => {
  it("makes a workspace session's flow in its own workspace, seals an http secret and shows it nowhere", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    const made = await api.create(session("alpha"), flow());
    expect(made.status).toBe(201);
    expect(made.headers?.location).toBe(`/api/flows/${made.body?.id}`);
    expect(made.body).toMatchObject({
      workspaceKey: "alpha",
      isActive: true,
      matchesKnownEvent: true,
      actions: [{ type: "http", url: "https://crm.example.com/hooks", hasSecret: true }],
    });
    expect(JSON.stringify(made.body)).not.toContain("a flow secret");
    const stored = tables.rows[0]?.actions[0] as { secretEncrypted: string };
    expect(JSON.stringify(tables.rows[0])).not.toContain("a flow secret");
    expect(secrets.open(stored.secretEncrypted)).toBe("a flow secret");
    // Naming another workspace is as if it did not exist; nothing is written.
    await expect(api.create(session("alpha"), { ...flow(), workspaceKey: "beta" })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    // A platform session without a key makes a flow of every workspace.
    expect((await api.create(operator, flow())).body?.workspaceKey).toBeNull();
    expect(tables.rows).toHaveLength(2);
  });

  it("lets a workspace session list, change and delete only its own workspace's flows", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    const alpha = (await api.create(session("alpha"), flow())).body?.id as string;
    const beta = (await api.create(session("beta"), flow())).body?.id as string;
    expect((await api.list(session("alpha"))).body?.items.map((f) => f.id)).toEqual([alpha]);
    expect((await api.list(operator)).body?.items.map((f) => f.id)).toEqual([beta, alpha]);
    await expect(api.list(session("alpha"), { workspaceKey: "beta" })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    const writes = tables.writes;
    await expect(api.replace(session("alpha"), beta, { ...flow(), name: "taken" })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(api.remove(session("alpha"), beta)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(tables.writes).toBe(writes);
    // A workspace session cannot move its flow into another workspace either.
    await expect(
      api.replace(session("alpha"), alpha, { ...flow(), workspaceKey: "beta" }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(tables.rows.find((r) => r.id === alpha)?.workspace_key).toBe("alpha");
    // A platform session may move one.
    expect(
      (await api.replace(operator, alpha, { ...flow(), workspaceKey: "gamma" })).body?.workspaceKey,
    ).toBe("gamma");
    expect((await api.remove(operator, beta)).status).toBe(204);
    expect(tables.rows.map((r) => r.id)).toEqual([alpha]);
    // Reading alone is not managing.
    await expect(api.create(session("alpha", ["flow.read"]), flow())).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
    });
  });

  it("holds a workspace to its most flows with a 409 naming the limit, while other workspaces go on", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    for (let i = 0; i < MAX; i++) await api.create(session("alpha"), flow());
    const refused = api.create(session("alpha"), flow());
    await expect(refused).rejects.toMatchObject({
      code: ErrorCode.Conflict,
      extensions: { limit: MAX, rule: "flows-per-workspace" },
    });
    await expect(api.create(session("alpha"), flow())).rejects.toThrow(/Workspace 'alpha' has 3 flows/);
    expect((await api.create(session("beta"), flow())).status).toBe(201);
    // Deleting one makes room.
    await api.remove(operator, tables.rows[0]?.id as string);
    expect((await api.create(session("alpha"), flow())).status).toBe(201);
  });

  it("keeps an http action's secret on a PUT that leaves it out for the same URL, and drops it for a new URL", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    const id = (await api.create(session("alpha"), flow())).body?.id as string;
    const sealed = (tables.rows[0]?.actions[0] as { secretEncrypted: string }).secretEncrypted;
    const kept = await api.replace(session("alpha"), id, flow([http()]));
    expect(kept.body?.actions).toEqual([
      { type: "http", url: "https://crm.example.com/hooks", hasSecret: true, includeSensitiveData: false },
    ]);
    expect((tables.rows[0]?.actions[0] as { secretEncrypted: string }).secretEncrypted).toBe(sealed);
    const moved = await api.replace(session("alpha"), id, flow([http("https://other.example.com/hooks")]));
    expect(moved.body?.actions[0]).toMatchObject({ hasSecret: false });
    expect(JSON.stringify(tables.rows[0])).not.toContain("secretEncrypted");
    // A new secret replaces the kept one; isActive left out keeps the stored state.
    await api.replace(session("alpha"), id, { ...flow(), isActive: false });
    const replaced = await api.replace(session("alpha"), id, flow([http(undefined, "another secret")]));
    expect(replaced.body?.isActive).toBe(false);
    expect(secrets.open((tables.rows[0]?.actions[0] as { secretEncrypted: string }).secretEncrypted)).toBe(
      "another secret",
    );
  });

  it("publishes only flow.* names and the events of plugins in its workspace's chain, never the platform's", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    const publish = (eventName: string) => flow([{ type: "publish", eventName }]);
    expect((await api.create(session("alpha"), publish("flow.contact-requested"))).status).toBe(201);
    expect((await api.create(session("alpha"), publish("hello.greeted"))).status).toBe(201);
    // The plugin is not in beta's chain; the platform's own events are the services' alone.
    for (const [principal, name] of [
      [session("beta"), "hello.greeted"],
      [session("beta"), "user.deleted"],
      [operator, "plugin.refused"],
      [operator, "flow."],
    ] as const) {
      await expect(api.create(principal, publish(name)), name).rejects.toMatchObject({
        code: ErrorCode.ValidationFailed,
        violations: [expect.objectContaining({ field: "/body/actions/0/eventName" })],
      });
    }
    // A platform flow may publish an installed plugin's event.
    expect((await api.create(operator, publish("hello.greeted"))).status).toBe(201);
    // Moving a flow that publishes hello.greeted out of the plugin's chain is refused, and nothing changes.
    const alphaFlow = tables.rows.find(
      (r) =>
        r.workspace_key === "alpha" &&
        r.actions[0]?.type === "publish" &&
        r.actions[0].eventName === "hello.greeted",
    );
    await expect(
      api.replace(operator, alphaFlow?.id as string, { ...publish("hello.greeted"), workspaceKey: "beta" }),
    ).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    expect(alphaFlow?.workspace_key).toBe("alpha");
  });

  it("refuses an http action to a private address or with credentials in its URL, writing nothing", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    for (const url of [
      "http://127.0.0.1:8080/hook",
      "http://10.1.2.3/x",
      "https://user:pw@crm.example.com/",
    ]) {
      await expect(api.create(operator, flow([http(url, "s")])), url).rejects.toMatchObject({
        code: ErrorCode.ValidationFailed,
        violations: [expect.objectContaining({ field: "/body/actions/0/url" })],
      });
    }
    expect(tables.writes).toBe(0);
  });

  it("pages newest first with a cursor that skips and repeats nothing", async () => {
    const tables = new MemoryFlows();
    const api = routes(tables);
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await api.create(session(`ws-${i}`), flow())).body?.id as string);
    const first = await api.list(operator, { limit: 2 });
    expect(first.body?.items.map((f) => f.id)).toEqual([made[2], made[1]]);
    const next = await api.list(operator, { limit: 2, cursor: first.body?.nextCursor });
    expect(next.body?.items.map((f) => f.id)).toEqual([made[0]]);
    expect(next.body?.nextCursor).toBeNull();
  });
});
