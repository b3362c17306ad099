/**
 * The webhook subscription routes through their contract, with the subscription tables in memory: no
 * NATS, no PostgreSQL. What the routes promise: a workspace session subscribes, sees and changes only its
 * own workspace's subscriptions (another's is as if it did not exist), the secret is sealed before it is
 * stored and never shown, and what the contract refuses never reaches the tables.
 */
import { randomBytes } from "node:crypto";

import type { Principal } from "@svc/bus";
import { caller, callRoute, platformEvents, webhookRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import { createTargetPolicy } from "./http-client.js";
import { MemorySubscriptions } from "./memory-subscriptions.js";
import { createSecretBox } from "./secrets.js";
import {
  circuitOf,
  createSubscription,
  deleteSubscription,
  eventCatalog,
  listSubscriptions,
  replaceSubscription,
  rotateSecret,
  setActivation,
} from "./subscriptions.js";

const secrets = createSecretBox(randomBytes(32).toString("base64"));
const allowed = createTargetPolicy([]);
const operator = caller(["webhook.read", "webhook.manage"]);
const session = (workspaceKey: string): Principal => ({
  subject: `admin-${workspaceKey}`,
  scope: "workspace",
  workspaceKey,
  permissions: ["webhook.read", "webhook.manage"],
  roles: ["admin"],
});

function routes(tables: MemorySubscriptions) {
  return {
    create: (principal: Principal, body: Record<string, unknown>) =>
      callRoute(
        webhookRoutes["webhooks.create"],
        (req) => createSubscription(tables, secrets, allowed, req),
        { principal, params: {}, query: {}, body } as never,
      ),
    list: (principal: Principal, query: Record<string, unknown> = {}) =>
      callRoute(webhookRoutes["webhooks.list"], (req) => listSubscriptions(tables, req), {
        principal,
        params: {},
        query,
        body: null,
      }),
    activate: (principal: Principal, id: string, isActive: boolean) =>
      callRoute(webhookRoutes["webhooks.activation"], (req) => setActivation(tables, req), {
        principal,
        params: { id },
        query: { isActive },
        body: null,
      }),
    replace: (principal: Principal, id: string, body: Record<string, unknown>) =>
      callRoute(webhookRoutes["webhooks.put"], (req) => replaceSubscription(tables, secrets, allowed, req), {
        principal,
        params: { id },
        query: {},
        body,
      } as never),
    rotate: (principal: Principal, id: string, query: Record<string, unknown> = {}) =>
      callRoute(
        webhookRoutes["webhooks.rotate-secret"],
        (req) => rotateSecret(tables, secrets, 86_400, req),
        { principal, params: { id }, query, body: null },
      ),
    remove: (principal: Principal, id: string) =>
      callRoute(webhookRoutes["webhooks.delete"], (req) => deleteSubscription(tables, req), {
        principal,
        params: { id },
        query: {},
        body: null,
      }),
  };
}

const hook = (eventName = "user.created") => ({
  eventName,
  targetUrl: "https://receiver.example.com/hooks",
  secret: "a shared secret",
});

describe("webhook subscriptions", () => {
  it("subscribes a workspace session in its own workspace, seals the secret and shows it nowhere", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const made = await api.create(session("alpha"), hook());
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ workspaceKey: "alpha", isActive: true, matchesKnownEvent: true });
    expect(made.headers?.location).toBe(`/api/webhooks/${made.body?.id}`);
    expect(JSON.stringify(made.body)).not.toContain("a shared secret");
    const stored = tables.rows[0];
    expect(stored?.secretSealed).not.toContain("a shared secret");
    expect(secrets.open(stored?.secretSealed as string)).toBe("a shared secret");
    // Naming another workspace is as if it did not exist; a blank key is the default workspace.
    await expect(api.create(session("alpha"), { ...hook(), workspaceKey: "beta" })).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    const blank = await api.create(operator, { ...hook(), workspaceKey: " " });
    expect(blank.body?.workspaceKey).toBe("default");
    const everywhere = await api.create(operator, hook("billing.*"));
    expect(everywhere.body).toMatchObject({ workspaceKey: null, matchesKnownEvent: false });
  });

  it("lets a workspace session list and change only its own workspace's subscriptions", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const alpha = (await api.create(session("alpha"), hook())).body?.id as string;
    const beta = (await api.create(session("beta"), hook())).body?.id as string;
    expect((await api.list(session("alpha"))).body?.items.map((s) => s.id)).toEqual([alpha]);
    expect((await api.list(operator)).body?.items.map((s) => s.id)).toEqual([beta, alpha]);
    // Another workspace's subscription: 404, unchanged.
    await expect(api.activate(session("alpha"), beta, false)).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(api.remove(session("alpha"), beta)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(tables.rows.find((r) => r.id === beta)?.is_active).toBe(true);
    // Its own: changed; the operator reaches every workspace.
    expect((await api.activate(session("alpha"), alpha, false)).body?.isActive).toBe(false);
    expect((await api.remove(operator, beta)).status).toBe(204);
    expect(tables.rows.map((r) => r.id)).toEqual([alpha]);
  });

  it("keeps custom headers sealed, shows only their names, refuses the platform's own, and keeps them on a PUT that leaves them out while the target stays", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const made = await api.create(operator, {
      ...hook(),
      headers: { Authorization: "Bearer receiver-key", "X-Route": "crm" },
    });
    expect(made.body?.headerNames).toEqual(["Authorization", "X-Route"]);
    expect(JSON.stringify(made.body)).not.toContain("receiver-key");
    const stored = tables.rows[0];
    expect(stored?.headersSealed).not.toContain("receiver-key");
    expect(JSON.parse(secrets.open(stored?.headersSealed as string))).toEqual({
      Authorization: "Bearer receiver-key",
      "X-Route": "crm",
    });
    const id = made.body?.id as string;
    // Left out: kept while the target stays; `{}`: removed.
    const kept = await api.replace(operator, id, hook());
    expect(kept.body?.headerNames).toEqual(["Authorization", "X-Route"]);
    const cleared = await api.replace(operator, id, { ...hook(), headers: {} });
    expect(cleared.body?.headerNames).toEqual([]);
    expect(tables.rows[0]?.headersSealed).toBeNull();
    // Left out on a PUT that points the subscription elsewhere: dropped, so the receiver's credentials
    // never go to another URL; given again, kept.
    await api.replace(operator, id, { ...hook(), headers: { Authorization: "Bearer receiver-key" } });
    const moved = await api.replace(operator, id, { ...hook(), targetUrl: "https://other.example.net/in" });
    expect(moved.body?.headerNames).toEqual([]);
    expect(tables.rows[0]?.headersSealed).toBeNull();
    const given = await api.replace(operator, id, {
      ...hook(),
      targetUrl: "https://elsewhere.example.net/in",
      headers: { Authorization: "Bearer other-key" },
    });
    expect(given.body?.headerNames).toEqual(["Authorization"]);
    // The platform's own headers, HTTP's, a name twice, a line break, too many: 400s naming the header.
    for (const headers of [
      { "X-Svc-Signature": "forged" },
      { "webhook-id": "x" },
      { "Content-Type": "text/plain" },
      { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
      { "X-A": "1", "x-a": "2" },
      { "X-A": "line\r\nX-Evil: 1" },
      { "Bad Name": "1" },
      Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, "v"])),
    ]) {
      await expect(
        api.create(operator, { ...hook(), headers }),
        JSON.stringify(headers),
      ).rejects.toMatchObject({
        code: ErrorCode.ValidationFailed,
      });
    }
  });

  it("replaces a subscription's settings with the checks of create, keeping the secret unless given", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const made = await api.create(session("alpha"), {
      ...hook(),
      description: "CRM",
      includeSensitiveData: true,
    });
    expect(made.body).toMatchObject({ description: "CRM", includeSensitiveData: true });
    const id = made.body?.id as string;
    const sealed = tables.rows[0]?.secretSealed;

    const changed = await api.replace(session("alpha"), id, {
      eventName: "user.*",
      targetUrl: "https://other.example.com/in",
    });
    expect(changed.status).toBe(200);
    // What the body leaves out takes its default; the secret, the workspace and the activation stay.
    expect(changed.body).toMatchObject({
      id,
      workspaceKey: "alpha",
      eventName: "user.*",
      targetUrl: "https://other.example.com/in",
      includeSensitiveData: false,
      description: "",
      isActive: true,
      matchesKnownEvent: true,
    });
    expect(Date.parse(changed.body?.updatedAtUtc as string)).toBeGreaterThan(
      Date.parse(changed.body?.createdAtUtc as string),
    );
    expect(tables.rows[0]?.secretSealed).toBe(sealed);
    // A new secret is sealed, and shown nowhere.
    const rekeyed = await api.replace(session("alpha"), id, { ...hook(), secret: "another shared secret" });
    expect(JSON.stringify(rekeyed.body)).not.toContain("another shared secret");
    expect(secrets.open(tables.rows[0]?.secretSealed as string)).toBe("another shared secret");

    // Another workspace's subscription is as if it did not exist; the operator reaches it.
    await expect(api.replace(session("beta"), id, hook())).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    await expect(api.replace(operator, crypto.randomUUID(), hook())).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    expect(
      (await api.replace(operator, id, { ...hook(), description: "by the operator" })).body?.description,
    ).toBe("by the operator");

    // What create refuses, replace refuses, before the tables are asked.
    const calls = tables.calls;
    const refused = [
      api.replace(operator, id, { ...hook(), targetUrl: "http://10.0.0.1/hooks" }),
      api.replace(operator, id, { ...hook(), targetUrl: "https://user:pw@receiver.example.com/hooks" }),
      api.replace(operator, id, { ...hook(), secret: "whsec_not base64" }),
      api.replace(operator, id, { ...hook(), secret: "" }),
      api.replace(operator, id, { ...hook(), eventName: "user.*.created" }),
      api.replace(operator, id, { targetUrl: "https://receiver.example.com/hooks" }),
      api.replace(operator, id, { ...hook(), description: "x".repeat(501) }),
      api.replace(operator, id, { ...hook(), isActive: false }),
      api.replace(operator, id, { ...hook(), workspaceKey: "beta" }),
    ];
    for (const attempt of refused) await expect(attempt).rejects.toMatchObject({ status: 400 });
    expect(tables.calls).toBe(calls);
    expect(tables.rows[0]).toMatchObject({ event_name: "user.created", description: "by the operator" });
  });

  it("rotates a secret: a generated whsec_ shown once, the old one kept for the overlap, never shown", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const id = (await api.create(session("alpha"), hook())).body?.id as string;
    const rotated = await api.rotate(session("alpha"), id);
    expect(rotated.status).toBe(200);
    expect(rotated.headers?.["cache-control"]).toBe("no-store");
    const secret = rotated.body?.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), "base64")).toHaveLength(32);
    expect(JSON.stringify(rotated.body)).not.toContain("a shared secret");
    const row = tables.rows[0];
    expect(secrets.open(row?.secretSealed as string)).toBe(secret);
    expect(secrets.open(row?.previousSealed as string)).toBe("a shared secret");
    // The default overlap (a day) unless the request says otherwise.
    expect(Date.parse(rotated.body?.previousSecretExpiresAtUtc as string)).toBe(
      (row?.updated_at.getTime() as number) - 1_000 + 86_400_000,
    );
    // Each rotation makes another secret; overlap 0 keeps none of the old.
    const again = await api.rotate(session("alpha"), id, { overlapSeconds: 0 });
    expect(again.body?.secret).not.toBe(secret);
    expect(again.body?.previousSecretExpiresAtUtc).toBeNull();
    expect(tables.rows[0]?.previousSealed).toBeNull();
    // The list shows neither secret.
    const listed = JSON.stringify((await api.list(session("alpha"))).body);
    expect(listed).not.toContain(secret.slice(6, 20));
    expect(listed).not.toContain((again.body?.secret as string).slice(6, 20));
    // Another workspace's: 404; a bad overlap: 400, before the tables.
    await expect(api.rotate(session("beta"), id)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    const calls = tables.calls;
    for (const overlapSeconds of [-1, 2_592_001, 1.5])
      await expect(api.rotate(operator, id, { overlapSeconds })).rejects.toMatchObject({ status: 400 });
    expect(tables.calls).toBe(calls);
  });

  it("walks pages newest first with the cursor it issues", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await api.create(operator, hook())).body?.id as string);
    const first = await api.list(operator, { limit: 2 });
    expect(first.body?.items.map((s) => s.id)).toEqual(ids.slice(0, 2));
    const second = await api.list(operator, { limit: 2, cursor: first.body?.nextCursor });
    expect(second.body?.items.map((s) => s.id)).toEqual(ids.slice(2, 4));
    const third = await api.list(operator, { limit: 2, cursor: second.body?.nextCursor });
    expect(third.body?.items.map((s) => s.id)).toEqual(ids.slice(4));
    expect(third.body?.nextCursor).toBeNull();
  });

  it("refuses what the contract and the target rules refuse before asking the tables", async () => {
    const tables = new MemorySubscriptions();
    const api = routes(tables);
    const refused = [
      api.create(operator, { ...hook(), targetUrl: "ftp://receiver.example.com/hooks" }),
      api.create(operator, { ...hook(), targetUrl: "https://user:pw@receiver.example.com/hooks" }),
      api.create(operator, { ...hook(), targetUrl: "http://127.0.0.1/hooks" }),
      api.create(operator, { ...hook(), secret: "" }),
      api.create(operator, { ...hook(), eventName: "not an event" }),
      api.list(operator, { limit: 101 }),
      api.list(operator, { cursor: "not-a-cursor" }),
      api.activate(operator, "not-a-uuid", true),
    ];
    for (const attempt of refused) await expect(attempt).rejects.toMatchObject({ status: 400 });
    await expect(api.create({ ...operator, permissions: ["webhook.read"] }, hook())).rejects.toMatchObject({
      code: ErrorCode.Forbidden,
    });
    // A session without a scope reaches nothing.
    await expect(api.remove({ ...session("alpha"), scope: null }, crypto.randomUUID())).rejects.toMatchObject(
      { code: ErrorCode.Forbidden },
    );
    expect(tables.calls).toBe(0);
  });
});

describe("a subscription's circuit and the event catalogue", () => {
  it("shows the circuit of the subscription's receiver in its workspace, to that workspace and the platform", async () => {
    const tables = new MemorySubscriptions();
    const id = (await routes(tables).create(session("alpha"), hook())).body?.id as string;
    const asked: string[] = [];
    const breaker = {
      stateOf: (receiver: string) => {
        asked.push(receiver);
        return { state: "open" as const, failures: 7, openUntil: Date.parse("2026-11-27T10:05:00Z") };
      },
    };
    const circuit = (principal: Principal) =>
      callRoute(webhookRoutes["webhooks.circuit"], (req) => circuitOf(tables, breaker, 5, req), {
        principal,
        params: { id },
        query: {},
        body: null,
      });
    expect((await circuit(session("alpha"))).body).toEqual({
      origin: "https://receiver.example.com",
      state: "open",
      consecutiveFailures: 7,
      openUntilUtc: "2026-11-27T10:05:00.000Z",
      threshold: 5,
    });
    // The circuit is the workspace's own: another workspace's deliveries to the same origin have theirs.
    expect(asked).toEqual(["alpha https://receiver.example.com"]);
    expect((await circuit(operator)).status).toBe(200);
    await expect(circuit(session("beta"))).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(asked).toHaveLength(2);
  });

  it("describes the platform's events by their publishers' schemas and a plugin's by what it declared", async () => {
    const tables = new MemorySubscriptions();
    tables.catalogRows = [
      {
        eventName: "user.created",
        source: "host",
        description: "A user was created",
        schema: null,
        example: null,
      },
      {
        eventName: "hello.greeted",
        source: "hello",
        description: "Published by plugin hello",
        schema: { type: "object", properties: { name: { type: "string" } } },
        example: { name: "Ada" },
      },
      {
        eventName: "hello.waved",
        source: "hello",
        description: "Published by plugin hello",
        schema: null,
        example: null,
      },
    ];
    const reply = await callRoute(webhookRoutes["events.catalog"], () => eventCatalog(tables), {
      principal: { ...operator, permissions: ["flow.read"] },
      params: {},
      query: {},
      body: null,
    });
    const [user, greeted, waved] = reply.body ?? [];
    expect(user?.schema).toEqual(platformEvents["user.created"].data);
    expect(user?.example).toEqual(platformEvents["user.created"].example);
    expect(greeted).toEqual({
      eventName: "hello.greeted",
      source: "hello",
      description: "Published by plugin hello",
      schema: { type: "object", properties: { name: { type: "string" } } },
      example: { name: "Ada" },
    });
    expect(waved).toEqual({
      eventName: "hello.waved",
      source: "hello",
      description: "Published by plugin hello",
      schema: null,
    });
  });
});
