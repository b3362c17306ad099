/**
 * The event catalogue gives each event's JSON Schema and an example. The platform's
 * schemas are checked against what the platform really publishes: the operator API drives the events, a
 * plain NATS client reads them off the stream, and Ajv (not the TypeBox the publishers are typed by) checks
 * each one's data against the schema the catalogue serves.
 */
import { type NatsConnection } from "@nats-io/transport-node";
import { connect } from "@nats-io/transport-node";
import { platformEvents } from "@svc/contracts";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const env = { BackendHost__RateLimitApiPerMinute: "0" };
let base: string;
let operator: string;
let nc: NatsConnection;
const published: Array<{ name: string; data: unknown }> = [];
const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

interface CatalogueEntry {
  eventName: string;
  source: string;
  description: string;
  schema: Record<string, unknown> | null;
  example?: unknown;
}

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  // What an older version left: a description since changed, an event since taken out, and a plugin's
  // row under a platform event's name. The dispatcher's start puts the code's list in their place.
  await h.sql(
    `UPDATE webhook_dispatcher.event_catalog SET description = 'stale' WHERE event_name = 'user.created'`,
  );
  await h.sql(`DELETE FROM webhook_dispatcher.event_catalog WHERE event_name = 'user.deleted'`);
  await h.sql(
    `INSERT INTO webhook_dispatcher.event_catalog (event_name, source, description)
     VALUES ('legacy.retired', 'host', 'An event no longer published'),
            ('user.deleted', 'acme.users', 'claimed by a plugin')`,
  );
  await h.start(webhookDispatcherService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  nc = await connect(h.natsOptions());
  nc.subscribe(`${h.env.SVC_SUBJECT_PREFIX}.events.>`, {
    callback: (_e, m) => {
      // The stream carries an event's data as the message body (the envelope is in the headers).
      published.push({ name: m.subject.split(".events.")[1] as string, data: m.json() });
    },
  });
});
afterAll(async () => {
  await nc?.close();
  await h.stopAll();
});

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats.default(ajv);

describe("the event catalogue (GET /api/events/catalog)", () => {
  it("gives every platform event a JSON Schema and an example that matches it", async () => {
    const catalogue = (await asOperator("GET", "/api/events/catalog")).json<CatalogueEntry[]>();
    const own = catalogue.filter((e) => e.source === "host");
    // Exactly the code's list, with its descriptions (the rows tampered with before the start included).
    expect(own.map((e) => [e.eventName, e.description]).sort()).toEqual(
      Object.entries(platformEvents)
        .map(([name, e]) => [name, e.description])
        .sort(),
    );
    expect(catalogue.find((e) => e.eventName === "legacy.retired")).toBeUndefined();
    for (const entry of own) {
      expect(entry.schema, entry.eventName).not.toBeNull();
      const validate = ajv.compile(entry.schema as object);
      expect(validate(entry.example), `${entry.eventName}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });

  it("describes what the platform really publishes: each event the operator API caused matches its schema", async () => {
    const catalogue = (await asOperator("GET", "/api/events/catalog")).json<CatalogueEntry[]>();
    const schemaOf = new Map(catalogue.map((e) => [e.eventName, e.schema]));
    const ok = (r: { status: number; text: string }, status: number) => expect(r.status, r.text).toBe(status);

    ok(await asOperator("POST", "/api/tenants", { tenantKey: "cat", name: "Catalogue" }), 201);
    ok(await asOperator("PUT", "/api/workspaces/cat-ws", { tenantKey: "cat", name: "One" }), 201);
    ok(
      await asOperator("PUT", "/api/workspaces/cat-ws", {
        tenantKey: "cat",
        name: "One renamed",
        bindings: [{ host: "cat.example.com", pathPrefix: "/shop" }],
      }),
      200,
    );
    const user = await asOperator("POST", "/api/users", {
      userName: "catalogued",
      password: "a long enough password",
      displayName: "Cat",
      email: "cat@example.com",
    });
    ok(user, 201);
    const userId = user.json<{ id: string }>().id;
    ok(await asOperator("PUT", `/api/users/${userId}`, { displayName: "Cat two" }), 200);
    ok(await asOperator("PUT", `/api/users/${userId}/activation?isActive=false`), 200);
    ok(await asOperator("PUT", `/api/workspaces/cat-ws/members/${userId}`), 201);
    ok(await asOperator("DELETE", `/api/workspaces/cat-ws/members/${userId}`), 204);
    const form = new FormData();
    form.append("file", new Blob([Buffer.from("just some text")], { type: "text/plain" }), "note.txt");
    const media = await api("POST", "/api/media?workspaceKey=cat-ws", operator, form);
    ok(media, 201);
    ok(await asOperator("DELETE", `/api/media/${media.json<{ id: string }>().id}`), 204);
    ok(await asOperator("DELETE", `/api/users/${userId}`), 204);
    ok(await asOperator("DELETE", "/api/workspaces/cat-ws"), 204);
    ok(await asOperator("PUT", "/api/workspaces/cat-ws2", { tenantKey: "cat", name: "Two" }), 201);
    ok(await asOperator("DELETE", "/api/tenants/cat?deleteWorkspaces=true"), 204);

    const expected = [
      "workspace.created",
      "workspace.updated",
      "user.created",
      "user.updated",
      "workspace.member-assigned",
      "workspace.member-removed",
      "media.uploaded",
      "media.deleted",
      "user.deleted",
      "workspace.deleted",
      "tenant.deleted",
    ];
    await until(async () => expected.every((name) => published.some((p) => p.name === name)), 15_000);
    const checked = new Set<string>();
    for (const { name, data } of published) {
      const schema = schemaOf.get(name);
      if (schema === undefined || schema === null) continue;
      const validate = ajv.compile(schema);
      expect(validate(data), `${name} ${JSON.stringify(data)}: ${ajv.errorsText(validate.errors)}`).toBe(
        true,
      );
      checked.add(name);
    }
    expect([...checked].sort()).toEqual([...expected].sort());
    // Both forms of user.updated: a change, and an activation (which says isActive).
    const updates = published.filter((p) => p.name === "user.updated").map((p) => p.data);
    expect(updates).toEqual(
      expect.arrayContaining([
        expect.not.objectContaining({ isActive: expect.anything() }),
        expect.objectContaining({ isActive: false }),
      ]),
    );
  });
});
