/**
 * A table-driven walk of every operator route of the spec's route catalogue through the real gateway, for
 * seven kinds of caller. Every route must be served (no 503 anywhere: a route answering 503 fails its own
 * test) and behave as the guard requires.
 */
import { gatewayService, OPERATOR_ROUTES, type OperatorRoute } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, http } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
const API_KEY = "conformance-api-key-0123456789";
let base: string;

const SAMPLE: Record<string, string> = {
  workspaceKey: "ws-other",
  userId: "00000000-0000-4000-8000-000000000001",
  id: "00000000-0000-4000-8000-000000000002",
  role: "conformance-role",
  tenantKey: "acme",
  tenantId: "acme",
  pluginId: "telephony",
  templateKey: "home",
  version: "1.0.0",
  entityName: "user",
  entityId: "e1",
  surfaceKey: "default",
  snippetKey: "footer",
};

function url(route: OperatorRoute): string {
  return route.path.replace(/:(\w+)/g, (_m, name: string) => SAMPLE[name] ?? "x");
}

function keyOf(route: OperatorRoute): string {
  return typeof route.permission === "string" ? route.permission : route.permission[0];
}

const api = bearerApi(() => base);

/** `route` as `token` (`null`: no bearer), with `{}` as its body where it takes one. */
function call(route: OperatorRoute, token: string | null, headers: Record<string, string> = {}) {
  const hasBody = route.method === "POST" || route.method === "PUT";
  return api(route.method, url(route), token, hasBody ? {} : undefined, { headers });
}

beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__EnableBootstrapApiKeys: "true",
    BackendHost__ApiKeys__0: API_KEY,
  };
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(jobReaperService, env);
  await h.start(webhookDispatcherService, env);
  await h.start(pluginRegistryService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
});
afterAll(() => h.stopAll());

describe("every operator route", () => {
  it("declares each route once, with a core permission key", () => {
    const seen = new Set(OPERATOR_ROUTES.map((r) => `${r.method} ${r.path}`));
    expect(seen.size).toBe(OPERATOR_ROUTES.length);
    expect(OPERATOR_ROUTES.length).toBeGreaterThan(90);
    // Integrations are among them, walked below with real answers.
    for (const path of ["/api/security/integrations", "/api/security/integrations/:id"]) {
      expect(
        OPERATOR_ROUTES.some((r) => r.path === path),
        path,
      ).toBe(true);
    }
  });

  it.each(OPERATOR_ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))("%s", async (_name, route) => {
    const key = keyOf(route);
    const superadmin = await mintToken({ scope: "platform", roles: ["superadmin"] });
    const probe = await call(route, superadmin);
    // Served: a 503 means no service answers this route.
    expect(probe.status, `${route.method} ${route.path} is not served: 503 ${probe.text}`).not.toBe(503);
    const allowed = (status: number) => expect([401, 403, 500, 503]).not.toContain(status);

    // anonymous
    const anonymous = await call(route, null);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers["content-type"]).toMatch(/^application\/problem\+json/);

    // a token lacking the key: exactly the spec's problem document for a missing key
    const lacking = await call(
      route,
      await mintToken({ scope: "platform", permissions: ["snippet.read"].filter((k) => k !== key) }),
    );
    expect(lacking.status).toBe(403);
    expect(lacking.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(lacking.json()).toMatchObject({
      type: "/problems/forbidden",
      title: "Forbidden",
      status: 403,
      missingPermission: key,
    });
    expect(lacking.json<{ detail: string }>().detail).toContain(key);

    // a token holding the key, `*`, and superadmin
    allowed((await call(route, await mintToken({ scope: "platform", permissions: [key] }))).status);
    allowed((await call(route, await mintToken({ scope: "platform", permissions: ["*"] }))).status);
    allowed(probe.status);

    // host.api through the API key, without grants
    const hostApi = await call(route, null, { "x-svc-api-key": API_KEY });
    expect(hostApi.status).toBe(403);

    // a workspace-scoped token, holding the key, on another workspace
    if (route.path.includes(":workspaceKey")) {
      const scoped = await call(
        route,
        await mintToken({ scope: "workspace", workspaceKey: "ws-mine", permissions: [key] }),
      );
      expect(scoped.status).toBe(404);
    }
    if (route.platformOnly) {
      // In its own workspace (reach is checked first): the scope is what it lacks.
      const scoped = await call(
        route,
        await mintToken({ scope: "workspace", workspaceKey: "ws-other", permissions: [key] }),
      );
      expect(scoped.status).toBe(403);
      expect(scoped.json()).toMatchObject({ requiredScope: "platform" });
    }
  });
});

describe("the OpenAPI description", () => {
  it("lists every operator route with its permission key and no public route", async () => {
    const doc = (await http(`${base}/openapi.json`)).json<{
      openapi: string;
      paths: Record<string, Record<string, { "x-svc-permission": string }>>;
    }>();
    expect(doc.openapi).toBe("3.1.0");
    for (const route of OPERATOR_ROUTES) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, "{$1}")]?.[route.method.toLowerCase()];
      expect(op?.["x-svc-permission"]).toBe(keyOf(route));
    }
    expect(Object.keys(doc.paths).some((p) => p.startsWith("/workspace/public"))).toBe(false);
    // Request and response shapes for each: a body where the route takes one, a schema for
    // every success answer that has a body, 204 where there is none.
    type Op = {
      requestBody?: { content: Record<string, { schema?: unknown }> };
      responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
    };
    for (const route of OPERATOR_ROUTES) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, "{$1}")]?.[
        route.method.toLowerCase()
      ] as unknown as Op;
      const name = `${route.method} ${route.path}`;
      if (route.body !== undefined || route.upload !== undefined) {
        expect(Object.values(op.requestBody?.content ?? {})[0]?.schema, name).toBeDefined();
      }
      const success = Object.entries(op.responses).filter(([status]) => status.startsWith("2"));
      expect(success.length, name).toBeGreaterThan(0);
      if (route.reply === undefined && route.download !== true) {
        expect(
          success.map(([status]) => status),
          name,
        ).toEqual(["204"]);
      } else {
        for (const [, response] of success.filter(([status]) => status !== "206")) {
          expect(Object.values(response.content ?? {})[0]?.schema, name).toBeDefined();
        }
      }
    }
    expect(doc.paths["/health"]).toBeUndefined();
  });

  it("groups operations by tag and says, per operation, what it does and who may call it", async () => {
    type Operation = {
      tags?: string[];
      summary: string;
      description?: string;
      security?: unknown[];
      responses: Record<string, { $ref?: string; headers?: Record<string, unknown> }>;
    };
    const doc = (await http(`${base}/openapi.json`)).json<{
      tags: Array<{ name: string; description: string }>;
      servers: Array<{ url: string }>;
      paths: Record<string, Record<string, Operation>>;
      components: {
        securitySchemes: { bearer: { description: string } };
        responses: Record<string, { headers?: Record<string, unknown> }>;
      };
    }>();
    const declared = new Set(doc.tags.map((t) => t.name));
    for (const name of ["tenants", "workspaces", "users", "roles", "plugins", "webhooks", "jobs"]) {
      expect(declared.has(name), name).toBe(true);
    }
    for (const tag of doc.tags) expect(tag.description.length, tag.name).toBeGreaterThan(20);
    expect(doc.servers[0]?.url).toBe("/");
    expect(doc.components.securitySchemes.bearer.description).toMatch(/ES256.*\/api\/auth\/login.*jwks/s);
    for (const route of OPERATOR_ROUTES) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, "{$1}")]?.[route.method.toLowerCase()];
      const name = `${route.method} ${route.path}`;
      expect(op?.tags?.length, name).toBe(1);
      expect(declared.has(op?.tags?.[0] ?? ""), name).toBe(true);
      // What it does (the summary), then its key and its scope.
      expect(op?.description, name).toContain(route.summary);
      expect(op?.description, name).toContain(`\`${keyOf(route)}\``);
      expect(op?.description, name).toMatch(
        route.platformOnly ? /Platform sessions only/ : /workspace-scoped session acts only in its own/,
      );
      // Rate limited: the 429 and the headers a client can pace itself by, on success too.
      expect(op?.responses["429"]?.$ref, name).toBe("#/components/responses/TooManyRequests");
      const success = Object.entries(op?.responses ?? {}).find(([status]) => status.startsWith("2"));
      expect(Object.keys(success?.[1].headers ?? {}), name).toEqual(
        expect.arrayContaining(["RateLimit-Policy", "RateLimit"]),
      );
    }
    expect(Object.keys(doc.components.responses.TooManyRequests?.headers ?? {}).sort()).toEqual([
      "RateLimit",
      "RateLimit-Policy",
      "Retry-After",
    ]);
    // Sign-in is described too, with no security requirement.
    expect(doc.paths["/api/auth/login"]?.post?.security).toEqual([]);
    expect(doc.paths["/api/auth/login"]?.post?.tags).toEqual(["auth"]);
  });
});
