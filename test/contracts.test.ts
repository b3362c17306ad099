/**
 * One typed contract per route. The type checks below are compiled by `make typecheck`
 * (CI runs it): each `@ts-expect-error` line must fail to compile, or tsc reports the directive as unused.
 * The runtime checks show the service side refusing what the contract refuses, whoever sends it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { Type } from "@sinclair/typebox";
import { CORE_PERMISSION_KEYS, filterWorkspaceKeys, isPlatformKey } from "@svc/access";
import type { Bus } from "@svc/bus";
import {
  configMessages,
  defineRoutes,
  jobReaperContract,
  jobRoutes,
  messageClient,
  OPERATOR_ROUTES,
  publishBroadcast,
  rbacRoutes,
  type ReplyOfRoute,
  type RequestOfRoute,
  requestRoute,
  resolverBroadcasts,
  resolverContract,
  resolverMessages,
  type RouteImplementation,
  serveMessage,
  serveMessages,
  serveRoute,
  serveRoutes,
  webhookRoutes,
} from "@svc/contracts";
import { defineJob } from "@svc/jobs";
import { defineService, type ServiceDefinition } from "@svc/runtime";
import { type gatewaySettings } from "@svc/service-gateway";
import { jobReaperSettings } from "@svc/service-job-reaper";
import { describe, expect, it } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";

const platform = {
  subject: "u1",
  scope: "platform" as const,
  workspaceKey: null,
  permissions: ["*"],
  roles: ["superadmin"],
};

/** Never called: compiled only. */
export function compileTimeChecks(bus: Bus) {
  // A route that exists, with a handler whose request and reply match it: compiles.
  serveRoute(bus, rbacRoutes["users.get"], (req) => {
    const id: string = req.params.userId;
    return {
      status: 200,
      body: {
        id,
        userName: "a",
        displayName: "",
        email: null,
        isActive: true,
        role: null,
        createdAtUtc: "2026-01-01T00:00:00.000Z",
        updatedAtUtc: "2026-01-01T00:00:00.000Z",
      },
    };
  });

  // @ts-expect-error a subject that no contract declares (a typo)
  serveRoute(bus, rbacRoutes["users.gte"], () => ({ status: 200 }));

  // @ts-expect-error a plain string is not a route
  serveRoute(bus, "rbac.users.get", () => ({ status: 200 }));

  serveRoute(bus, rbacRoutes["users.get"], (req) => {
    // @ts-expect-error a path parameter the route does not have
    void req.params.workspaceKey;
    return { status: 204 };
  });

  // @ts-expect-error a reply that breaks the reply schema (isActive must be a boolean, fields missing)
  serveRoute(bus, rbacRoutes["users.get"], () => ({ status: 200, body: { id: "x", isActive: "yes" } }));

  serveRoute(bus, webhookRoutes["webhooks.create"], (req) => {
    // @ts-expect-error the body's targetUrl is a string, not a number
    const port: number = req.body.targetUrl;
    void port;
    return { status: 204 };
  });

  void requestRoute(bus, jobRoutes["jobs.list"], {
    principal: platform,
    params: {},
    // @ts-expect-error a request whose query breaks the route's (limit is a number)
    query: { limit: "5" },
    body: null,
  });

  // Every `:param` of a route's path is declared by its params schema.
  defineRoutes("resolver", {
    "things.get": {
      method: "GET",
      path: "/api/things/:thingKey/parts/:partKey",
      permission: "tenant.read",
      summary: "Get a part",
      params: Type.Object({ thingKey: Type.String(), partKey: Type.String() }),
    },
  });
  defineRoutes("resolver", {
    // @ts-expect-error :partKey is in the path but not in the params schema
    "things.get": {
      method: "GET",
      path: "/api/things/:thingKey/parts/:partKey",
      permission: "tenant.read",
      summary: "Get a part",
      params: Type.Object({ thingKey: Type.String() }),
    },
  });
  defineRoutes("resolver", {
    // @ts-expect-error a path with a parameter and no params schema at all
    "things.list": { method: "GET", path: "/api/things/:thingKey", permission: "tenant.read", summary: "x" },
  });

  // A service's implementation has a handler for every route of its contract, each typed by its route.
  const things = defineRoutes("resolver", {
    "things.list": { method: "GET", path: "/api/things", permission: "tenant.read", summary: "List" },
    "things.delete": {
      method: "DELETE",
      path: "/api/things/:thingKey",
      permission: "tenant.delete",
      summary: "Delete",
      params: Type.Object({ thingKey: Type.String() }),
    },
  });
  serveRoutes(bus, things, {
    "things.list": () => ({ status: 200 }),
    "things.delete": (req) => ({ status: req.params.thingKey === "" ? 404 : 204 }),
  });
  serveRoutes(
    bus,
    things,
    // @ts-expect-error things.delete has no handler
    { "things.list": () => ({ status: 200 }) },
  );
  serveRoutes(bus, things, {
    "things.list": () => ({ status: 200 }),
    // @ts-expect-error a handler reading a parameter its route does not have
    "things.delete": (req) => ({ status: req.params.otherKey === "" ? 404 : 204 }),
  });

  // A service reads the platform's settings and its own, never another service's (which a process that
  // does not start that service has not parsed).
  const gatewayStart: ServiceDefinition<typeof gatewaySettings>["start"] = ({ config, live }) => {
    void config.backendHost.rateLimitApiPerMinute;
    void live.backendHost.rateLimitAuthPerMinute;
    void config.backendHost.requestTimeoutMs;
    // @ts-expect-error the webhook dispatcher's secrets key is not the gateway's to read
    void config.backendHost.secretsEncryptionKey;
    // @ts-expect-error nor is its delivery time limit, at run time either
    void live.backendHost.webhookTimeoutMs;
    return undefined;
  };
  void gatewayStart;

  // The reply's type is the contract's.
  void requestRoute(bus, jobRoutes["jobs.list"], {
    principal: platform,
    params: {},
    query: {},
    body: null,
  }).then((reply: ReplyOfRoute<(typeof jobRoutes)["jobs.list"]>) => {
    // @ts-expect-error items are job views, not strings
    const first: string | undefined = reply.body?.items[0];
    void first;
  });

  const request: RequestOfRoute<(typeof rbacRoutes)["member-roles.put"]> = {
    principal: platform,
    params: { workspaceKey: "a", userId: "u" },
    query: {},
    // @ts-expect-error roles is an array of role names
    body: { roles: "admin" },
  };
  void request;

  // Messages between services: the owner implements every one, a caller sends only what the owner declares.
  serveMessages(
    bus,
    resolverMessages,
    // @ts-expect-error tenancy.lookup (and the rest) have no handler
    { "workspace.resolve": () => ({ resolved: false, workspaceKey: null }) },
  );
  serveMessage(
    bus,
    resolverMessages["workspace.resolve"],
    // @ts-expect-error a reply that breaks the message's (resolved is a boolean)
    () => ({ resolved: "no", workspaceKey: null }),
  );
  const resolver = messageClient(bus, resolverMessages);
  // @ts-expect-error a message the resolver does not declare
  void resolver.request("workspace.delete", {});
  // @ts-expect-error a request without the path
  void resolver.request("workspace.resolve", { host: "a" });
  // @ts-expect-error a fan-out message cannot be sent to one replica, nor a plain one gathered
  void messageClient(bus, configMessages).request("describe", {});
  void resolver.request("workspace.resolve", { host: "a", path: "/" }).then((reply) => {
    // @ts-expect-error the reply's workspaceKey is a string or null
    const key: number = reply.workspaceKey;
    void key;
  });
  // A service's start answers a handler for every route and message of its contract.
  defineService(jobReaperContract, {
    settings: jobReaperSettings,
    start: () => ({
      // @ts-expect-error diagnostics.get has no handler
      routes: {
        "jobs.list": () => ({ status: 200, body: { items: [], nextCursor: null } }),
        "diagnostics.start": () => ({ status: 204 }),
        "diagnostics.stop": () => ({ status: 204 }),
      },
      messages: {},
    }),
  });
  defineService(resolverContract, {
    settings: jobReaperSettings,
    start: () => ({
      routes: {} as RouteImplementation<typeof resolverContract.routes>,
      // @ts-expect-error the resolver's messages have no handlers
      messages: {},
    }),
  });

  // @ts-expect-error a broadcast's payload is its contract's
  publishBroadcast(bus, resolverBroadcasts["cache.invalidate"], { reason: 1 });

  // A service's start answers a handler for every job type it declares, typed by the job's payload.
  defineService(jobReaperContract, {
    settings: jobReaperSettings,
    jobs: { count: countJob },
    start: () => ({
      routes: {} as RouteImplementation<typeof jobReaperContract.routes>,
      messages: {},
      // @ts-expect-error the job type count has no handler
      jobs: {},
    }),
  });
  defineService(jobReaperContract, {
    settings: jobReaperSettings,
    jobs: { count: countJob },
    start: () => ({
      routes: {} as RouteImplementation<typeof jobReaperContract.routes>,
      messages: {},
      jobs: {
        count: {
          concurrency: 2,
          handler: async (job) => {
            // @ts-expect-error the payload is the job type's: n is a number
            const n: string = job.payload.n;
            void n;
          },
        },
      },
    }),
  });
}

const countJob = defineJob<{ n: number }>("count", { maxAttempts: 2 });

describe("route contracts", () => {
  it("gives every route one subject, owned by the service its first token names", () => {
    const subjects = OPERATOR_ROUTES.map((r) => r.subject);
    expect(new Set(subjects).size).toBe(subjects.length);
    for (const route of OPERATOR_ROUTES) expect(route.subject.startsWith(`${route.service}.`)).toBe(true);
    expect(new Set(OPERATOR_ROUTES.map((r) => `${r.method} ${r.path}`)).size).toBe(OPERATOR_ROUTES.length);
  });

  it("decodes on the service side: a request that breaks the schemas is a 400 listing each field", () => {
    const route = rbacRoutes["member-roles.put"];
    expect(
      route.decode({
        principal: platform,
        params: { workspaceKey: "a", userId: "5f0c2a8e-3b7e-4a55-9a4f-2f6c1f3b9d10" },
        query: {},
        body: { roles: ["admin"] },
      }).body.roles,
    ).toEqual(["admin"]);
    let error: unknown;
    try {
      route.decode({
        principal: { ...platform, scope: "everything" },
        params: { workspaceKey: "A B", userId: "not-a-uuid" },
        query: {},
        body: { roles: "admin" },
      });
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ status: 400 });
    const fields = (error as { extensions: { errors: Array<{ field: string }> } }).extensions.errors.map(
      (e) => e.field,
    );
    for (const field of ["/principal/scope", "/params/workspaceKey", "/params/userId", "/body/roles"])
      expect(fields).toContain(field);
  });

  it("checks a reply against the reply schema as the caller would see it", () => {
    const route = rbacRoutes["member-roles.get"];
    expect(() => route.checkReply({ status: 200, body: { userId: platform.subject, roles: [] } })).toThrow();
    expect(() =>
      route.checkReply({
        status: 200,
        body: { userId: "5f0c2a8e-3b7e-4a55-9a4f-2f6c1f3b9d10", roles: ["a"] },
      }),
    ).not.toThrow();
    // Dates travel as strings: checked after the JSON round trip.
    expect(() =>
      jobRoutes["jobs.list"].checkReply({ status: 200, body: { items: [], nextCursor: null } }),
    ).not.toThrow();
    // Errors and empty answers carry no body to check.
    expect(() => route.checkReply({ status: 204 })).not.toThrow();
  });
});

describe("a service's job types", () => {
  it("are declared under their own names: a job type under another name is refused at definition", () => {
    expect(() =>
      defineService(jobReaperContract, {
        settings: jobReaperSettings,
        jobs: { counter: countJob },
        start: () => ({
          routes: {} as RouteImplementation<typeof jobReaperContract.routes>,
          messages: {},
          jobs: { counter: { handler: async () => undefined } },
        }),
      }),
    ).toThrow("job type count is declared as counter");
  });
});

describe("one table of platform keys", () => {
  const keysOf = (r: (typeof OPERATOR_ROUTES)[number]): readonly string[] =>
    typeof r.permission === "string" ? [r.permission] : r.permission;

  it("every key a workspace session may carry is accepted from it by some route; no platform key is", () => {
    for (const key of CORE_PERMISSION_KEYS) {
      const fromWorkspace = OPERATOR_ROUTES.filter((r) => !r.platformOnly && keysOf(r).includes(key));
      if (isPlatformKey(key))
        expect(
          fromWorkspace.map((r) => `${r.method} ${r.path}`),
          key,
        ).toEqual([]);
      else
        expect(fromWorkspace.length, `${key}: no route takes it from a workspace session`).toBeGreaterThan(0);
    }
    // And workspace sign-in drops exactly the platform keys.
    expect(filterWorkspaceKeys(CORE_PERMISSION_KEYS, new Set()).sort()).toEqual(
      CORE_PERMISSION_KEYS.filter((k) => !isPlatformKey(k)).sort(),
    );
  });

  it("the operator guide lists every platform-only operation", () => {
    const guide = readFileSync(join(repoRoot, "docs", "operator-guide.md"), "utf8").replace(/\s+/g, " ");
    for (const route of OPERATOR_ROUTES.filter((r) => r.platformOnly)) {
      expect(guide, route.path).toContain(`\`${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}\``);
    }
  });
});

describe("one place for every reading of the spec", () => {
  it("docs/spec-conformance.md names every ADR, and the docs link to it", () => {
    const conformance = readFileSync(join(repoRoot, "docs", "spec-conformance.md"), "utf8");
    const adrs = readdirSync(join(repoRoot, "docs", "adr")).filter((f) => /^\d{4}-/.test(f));
    expect(adrs.length).toBeGreaterThan(13);
    for (const adr of adrs) expect(conformance, adr).toContain(adr.slice(0, 4));
    for (const doc of ["README.md", "docs/architecture.md", "docs/operator-guide.md"]) {
      expect(readFileSync(join(repoRoot, doc), "utf8"), doc).toContain("spec-conformance.md");
    }
  });
});
