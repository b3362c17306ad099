/**
 * The configuration API. Definitions and effective values gathered from every running
 * service (secrets never shown), run-time values checked by the services that own them, and a changed rate
 * limit taking effect on a second gateway without a restart.
 */
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
let gateways: string[] = [];
let operator: string;

// The tests' requests name their client in X-Forwarded-For (loopback is a trusted proxy here), so one
// client can be rate-limited while the operator's calls go on.
const env = { BackendHost__RateLimitApiPerMinute: "100000", BackendHost__TrustedProxies__0: "127.0.0.1" };
const OPERATOR_CLIENT = "203.0.113.1";

const api = bearerApi(() => gateways[0] as string);
/** Request options naming the client in X-Forwarded-For (loopback is a trusted proxy here). */
const from = (client: string) => ({ headers: { "x-forwarded-for": client } });
const asOperator = (method: string, path: string, body?: unknown) =>
  api(method, path, operator, body, from(OPERATOR_CLIENT));

interface Definition {
  variable: string;
  owner: string;
  type: string;
  changeable: boolean;
  secret: boolean;
}
interface Effective {
  variable: string;
  value: string | null;
  source: string;
  secret: boolean;
}

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(webhookDispatcherService, env);
  gateways = [
    (await h.start(gatewayService, env)).hooks.httpAddress as string,
    (await h.start(gatewayService, env)).hooks.httpAddress as string,
  ];
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});
afterAll(() => h.stopAll());

describe("the configuration API", () => {
  it("lists every running service's settings, never a secret's value", async () => {
    const defs = (await asOperator("GET", "/api/config/definitions")).json<{ items: Definition[] }>().items;
    const byName = new Map(defs.map((d) => [d.variable, d]));
    expect(byName.get("BackendHost__RateLimitApiPerMinute")).toMatchObject({
      owner: "gateway",
      type: "integer",
      changeable: true,
      secret: false,
    });
    expect(byName.get("BackendHost__JwtSigningKey")).toMatchObject({ secret: true, changeable: false });
    expect(byName.get("BackendHost__RequestTimeoutMs")).toMatchObject({ changeable: false });
    // Settings of rbac and the resolver are there too (gathered from each service).
    expect(defs.some((d) => d.owner === "rbac")).toBe(true);

    const effective = (await asOperator("GET", "/api/config/effective")).json<{ items: Effective[] }>().items;
    const values = new Map(effective.map((e) => [e.variable, e]));
    expect(values.get("BackendHost__RateLimitApiPerMinute")).toMatchObject({
      value: "100000",
      source: "environment",
    });
    expect(values.get("BackendHost__RateLimitAuthPerMinute")).toMatchObject({
      value: "5",
      source: "default",
    });
    expect(values.get("BackendHost__JwtSigningKey")).toMatchObject({ value: null, secret: true });
    const text = JSON.stringify(effective);
    expect(text).not.toContain("BEGIN PRIVATE KEY");
  });

  it("refuses what cannot change at run time, bad values and unknown names, each listed", async () => {
    const bad = await asOperator("PUT", "/api/config/values", {
      values: {
        BackendHost__RequestTimeoutMs: 1000,
        BackendHost__RateLimitApiPerMinute: "lots",
        BackendHost__NoSuchThing: 1,
      },
    });
    expect(bad.status).toBe(400);
    const errors = bad.json<{ errors: Array<{ field: string; message: string }> }>().errors;
    expect(errors).toEqual(
      expect.arrayContaining([
        { field: "/body/values/BackendHost__RequestTimeoutMs", message: expect.stringContaining("run time") },
        {
          field: "/body/values/BackendHost__RateLimitApiPerMinute",
          message: expect.stringContaining("integer"),
        },
        {
          field: "/body/values/BackendHost__NoSuchThing",
          message: "is not a setting of any running service",
        },
      ]),
    );
  });

  it("applies a changed rate limit on another gateway without a restart, and reverts it", async () => {
    const other = gateways[1] as string;
    const onOther = bearerApi(() => other);
    const put = await asOperator("PUT", "/api/config/values", {
      values: { BackendHost__RateLimitApiPerMinute: 3 },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.json()).toEqual({ stored: { BackendHost__RateLimitApiPerMinute: "3" } });
    // Within a second the second gateway limits this client to 3 requests a minute.
    let client = 0;
    const limited = await eventually(
      async () => {
        // A fresh client each probe: four requests, the fourth over a limit of three.
        const ip = `198.51.100.${++client}`;
        const statuses: number[] = [];
        for (let i = 0; i < 4; i++)
          statuses.push((await onOther("GET", "/api/rbac/roles", operator, undefined, from(ip))).status);
        return statuses;
      },
      (statuses) => statuses[3] === 429,
      1_000,
    );
    expect(limited).toEqual([200, 200, 200, 429]);
    const stored = (
      await onOther("GET", "/api/config/effective", operator, undefined, from("198.51.100.200"))
    ).json<{
      items: Effective[];
    }>();
    expect(stored.items.find((e) => e.variable === "BackendHost__RateLimitApiPerMinute")).toMatchObject({
      value: "3",
      source: "stored",
    });

    // null: back to the environment's value, on every gateway.
    const reverted = await api(
      "PUT",
      "/api/config/values",
      operator,
      { values: { BackendHost__RateLimitApiPerMinute: null } },
      from("203.0.113.50"),
    );
    expect(reverted.json()).toEqual({ stored: {} });
    const freed = await eventually(
      async () => {
        const ip = `198.51.100.${++client}`;
        const statuses: number[] = [];
        for (let i = 0; i < 4; i++)
          statuses.push((await onOther("GET", "/api/rbac/roles", operator, undefined, from(ip))).status);
        return statuses;
      },
      (statuses) => statuses.every((s) => s === 200),
      1_000,
    );
    expect(freed).toEqual([200, 200, 200, 200]);
  });

  it("changes the webhook settings at run time, checked by the dispatcher that declares them", async () => {
    const bad = await asOperator("PUT", "/api/config/values", {
      values: { BackendHost__WebhookTimeoutMs: 5 },
    });
    expect(bad.status).toBe(400);
    const put = await asOperator("PUT", "/api/config/values", {
      values: { BackendHost__WebhookTimeoutMs: 2_500, BackendHost__WebhookMaxResponseBytes: 1_024 },
    });
    expect(put.status, put.text).toBe(200);
    const effective = await eventually(
      async () =>
        (await asOperator("GET", "/api/config/effective"))
          .json<{ items: Effective[] }>()
          .items.filter((e) => e.variable.startsWith("BackendHost__Webhook")),
      (items) => items.filter((e) => e.source === "stored").length === 2,
      1_000,
    );
    expect(effective.find((e) => e.variable === "BackendHost__WebhookTimeoutMs")).toMatchObject({
      value: "2500",
      source: "stored",
    });
    await asOperator("PUT", "/api/config/values", {
      values: { BackendHost__WebhookTimeoutMs: null, BackendHost__WebhookMaxResponseBytes: null },
    });
  });
});
