import type { TSchema } from "@sinclair/typebox";
import { Jwks, LoginReply, type RouteContract } from "@svc/contracts";
import { HOST_VERSION } from "@svc/runtime";

import { LoginBody } from "./auth-schemas.js";

const problem = { $ref: "#/components/responses/Problem" };
const tooMany = { $ref: "#/components/responses/TooManyRequests" };
/** The rate-limit headers of an answer under a limit (absent while the limit is 0, i.e. off). */
const limitHeaders = {
  "RateLimit-Policy": { $ref: "#/components/headers/RateLimit-Policy" },
  RateLimit: { $ref: "#/components/headers/RateLimit" },
};

/** Strips TypeBox's symbol keys: plain JSON Schema (OpenAPI 3.1 uses JSON Schema 2020-12). */
function plain(schema: TSchema): unknown {
  return JSON.parse(JSON.stringify(schema));
}

function parameters(route: RouteContract) {
  const out: unknown[] = [];
  const add = (where: "path" | "query", schema: TSchema | undefined, names: string[]) => {
    const props =
      (schema as { properties?: Record<string, TSchema>; required?: string[] } | undefined)?.properties ?? {};
    const required = new Set((schema as { required?: string[] } | undefined)?.required ?? []);
    for (const name of names.length > 0 ? names : Object.keys(props)) {
      out.push({
        name,
        in: where,
        required: where === "path" || required.has(name),
        schema: props[name] ? plain(props[name]) : { type: "string" },
      });
    }
  };
  const pathNames = [...route.path.matchAll(/:(\w+)/g)].map((m) => m[1] as string);
  add("path", route.params, pathNames);
  if (route.query) add("query", route.query, []);
  if (route.method !== "GET") {
    out.push({
      name: "Idempotency-Key",
      in: "header",
      required: false,
      description:
        "Makes a retry safe: the same key and request within 24 hours replays the first answer " +
        "(Idempotency-Replayed: true); the same key with another request is a 422; while the first runs, 409.",
      schema: { type: "string", minLength: 1, maxLength: 255 },
    });
  }
  return out;
}

/** The request body: JSON, an uploaded package archive, or a multipart media upload. */
function requestBody(route: RouteContract): Record<string, unknown> {
  if (route.upload === "media") {
    return {
      requestBody: {
        required: true,
        content: {
          "multipart/form-data": {
            schema: {
              type: "object",
              required: ["file"],
              properties: { file: { type: "string", contentEncoding: "binary" } },
            },
          },
        },
      },
    };
  }
  if (route.upload === true) {
    const archive = { schema: { type: "string", contentEncoding: "binary" } };
    return {
      requestBody: {
        required: true,
        content: {
          "application/gzip": archive,
          "application/zip": archive,
          "application/x-tar": archive,
          "application/octet-stream": archive,
          // The archive as the one file of a form (`curl -F package=@hello.tgz`, a browser).
          "multipart/form-data": {
            schema: {
              type: "object",
              required: ["package"],
              properties: { package: { type: "string", contentEncoding: "binary" } },
            },
          },
        },
      },
    };
  }
  if (route.body === undefined) return {};
  return {
    requestBody: { required: true, content: { "application/json": { schema: plain(route.body) } } },
  };
}

/**
 * The success answers: a route without a reply body answers 204; a POST or PUT answers 201 when it
 * created the resource (with a Location header) and 200 otherwise; a download streams the stored file.
 */
function successResponses(route: RouteContract): Record<string, unknown> {
  const headers = limitHeaders;
  if (route.download === true) {
    return {
      "200": {
        description: "The file's bytes (Range requests answer 206)",
        headers,
        content: { "application/octet-stream": { schema: { type: "string", contentEncoding: "binary" } } },
      },
      "206": { description: "The requested byte range", headers },
    };
  }
  if (route.reply === undefined) return { "204": { description: "Done; no body", headers } };
  const content = { "application/json": { schema: plain(route.reply) } };
  if (route.method === "GET") return { "200": { description: "Success", headers, content } };
  return {
    "200": { description: "Success", headers, content },
    "201": {
      description: "Created (when the request created the resource)",
      headers: {
        ...headers,
        Location: { description: "The created resource's path", schema: { type: "string" } },
      },
      content,
    },
  };
}

/** The operation groups, one per resource, in the order a reader meets them. */
const TAGS = [
  ["auth", "Signing in, and the keys that verify access tokens. Anonymous; policy `auth` limits sign-in."],
  ["tenants", "Tenants: the customers of the platform, each owning workspaces. Platform sessions only."],
  [
    "workspaces",
    "Workspaces: a tenant's sites, with their host and path bindings, access policy and public base URL.",
  ],
  ["members", "A workspace's members and their roles in it (workspace administration)."],
  ["users", "Global user accounts. Writes and the data export need a platform session."],
  ["roles", "Roles, the permission keys they grant, and users' global roles. Platform sessions only."],
  ["integrations", "Integrations: API clients with their own credentials."],
  ["surfaces", "Surfaces: a workspace's application roots and navigation trees, rendered publicly."],
  ["snippets", "Snippets: named fragments a workspace's surface templates can use."],
  ["media", "A workspace's uploaded files: upload, list, download (with ranges), delete."],
  ["custom-fields", "Custom fields that installed plugins define on entities, and their values."],
  [
    "plugins",
    "Plugin packages: install (signed archives, the host's disk, a package feed), update, activate, " +
      "deactivate, uninstall; signature reports, the audit trail and contract compatibility.",
  ],
  ["entitlements", "Which tenants and workspaces may use which plugins, and through what grant."],
  [
    "plugin-chains",
    "A workspace's ordered plugin chain, and the plugins a tenant's admins may put in their own chains.",
  ],
  ["themes", "Theme plugins, template definitions and a workspace's theme settings."],
  ["webhooks", "Webhook subscriptions: events delivered to receivers, signed, retried and deduplicated."],
  ["events", "The catalogue of events the platform and its plugins publish."],
  ["flows", "Flows: a trigger (an event name pattern) and actions run as durable jobs on each match."],
  ["jobs", "Background jobs (webhook deliveries, flow runs), dead letters included."],
  ["notifications", "The signed-in user's notifications."],
  ["config", "Settings of the running services, and run-time changes to those that allow it."],
  ["diagnostics", "Recordings of database commands and NATS requests across services, for debugging."],
] as const satisfies ReadonlyArray<readonly [string, string]>;

type Tag = (typeof TAGS)[number][0];

/** A route's tag, from the first segment of its contract name (`tenants.create` is in `tenants`). */
const TAG_OF_NAME: Readonly<Record<string, Tag>> = {
  tenants: "tenants",
  "tenant-hosts": "tenants",
  workspaces: "workspaces",
  members: "members",
  "member-roles": "members",
  users: "users",
  roles: "roles",
  permissions: "roles",
  "role-assignments": "roles",
  security: "roles",
  integrations: "integrations",
  surfaces: "surfaces",
  snippets: "snippets",
  media: "media",
  "custom-fields": "custom-fields",
  plugins: "plugins",
  contracts: "plugins",
  signers: "plugins",
  entitlements: "entitlements",
  assignments: "plugin-chains",
  delegations: "plugin-chains",
  themes: "themes",
  webhooks: "webhooks",
  events: "events",
  flows: "flows",
  jobs: "jobs",
  notifications: "notifications",
  config: "config",
  diagnostics: "diagnostics",
};

/** The tag of a route; a route whose group has no tag is a programming error (the suite builds the document). */
export function tagOf(route: RouteContract): Tag {
  const name = route.subject.slice(route.service.length + 1);
  const tag = TAG_OF_NAME[name.split(".")[0] ?? ""];
  if (tag === undefined) throw new Error(`OpenAPI: no tag for route ${route.subject}; add it to TAG_OF_NAME`);
  return tag;
}

const sentence = (text: string) => (/[.!?)]$/.test(text) ? text : `${text}.`);

/** What an operation does and who may call it: its permission key(s) and the session scope it needs. */
function describe(route: RouteContract): string {
  const keys = typeof route.permission === "string" ? [route.permission] : [...route.permission];
  const named = keys.map((k) => `\`${k}\``).join(" or ");
  const holder = `Requires the permission ${named} (the \`superadmin\` role and a \`*\` grant pass every check).`;
  const scope = route.platformOnly
    ? "Platform sessions only: a workspace-scoped session is refused with 403 even when it holds the key."
    : "A platform session reaches every workspace; a workspace-scoped session acts only in its own " +
      "workspace, and any other workspace it names is answered 404, as if it did not exist.";
  return `${sentence(route.summary)}\n\n**Who may call it:** ${holder} ${scope}`;
}

const API_DESCRIPTION = `The operator API of the svc workspace platform: tenants, workspaces, users and roles, plugins,
webhooks, jobs and the rest, behind one gateway. Public workspace routes (\`/workspace/public/*\`) and plugin
routes (\`/api/plugins/{pluginId}/…\`, declared by each plugin) are not described here.

**Authentication.** Sign in with \`POST /api/auth/login\` and send the \`accessToken\` it returns as
\`Authorization: Bearer <token>\`. The token is an ES256-signed JWT; verify it against the keys at
\`/.well-known/jwks.json\`. Its \`svc_scope\` claim is \`platform\` (reaches every workspace) or \`workspace\`
(bound to its \`workspace_key\`), and its \`permission\` claims are the keys each operation names. Where the
deployment enables it, the break-glass key goes in \`X-Svc-Api-Key\` and acts as role \`host.api\`.

**Errors** are RFC 9457 problem documents (\`application/problem+json\`); a 403 names the missing key in
\`missingPermission\`.

**Rate limits.** Policy \`api\` limits every operation here (600 requests per minute per client by default),
policy \`auth\` limits sign-in (5 per minute per client, an IPv6 client by its /64; and 10 per account). Each answer under a limit carries \`RateLimit-Policy\` and
\`RateLimit\` (draft-ietf-httpapi-ratelimit-headers): the quota, what is left and when the window resets, so
a client can slow down before it is refused. A refusal is a 429 with \`Retry-After: 60\`. Gateway replicas
share counts within about 100 ms, so with several replicas the remaining count is approximate.

**Retries.** Writes accept an \`Idempotency-Key\` header: the same key and request within 24 hours replays the
first answer.

**Lists** are paged: pass the \`nextCursor\` of one page as \`cursor\` to get the next.`;

/**
 * The OpenAPI 3.1 description of the operator API, derived from the route contracts (@svc/contracts), as
 * the routes and the guard are: each operation has its resource's tag, a description naming its permission
 * key and scope, and `x-svc-permission`. Public routes are excluded; sign-in and the
 * JWKS are included.
 */
export function buildOpenApi(routes: readonly RouteContract[]) {
  const paths: Record<string, Record<string, unknown>> = {
    "/api/auth/login": {
      post: {
        operationId: "gateway.auth.login",
        tags: ["auth"],
        summary: "Sign in",
        description:
          "Exchanges a user name and password for an access token: a platform session, or with " +
          "`workspaceKey` a session of that workspace holding the keys of the user's member roles there.\n\n" +
          "**Who may call it:** anyone (no token). Rate limited by policy `auth`, counted exactly across " +
          "replicas; while that count cannot be reached, sign-in answers 503.",
        security: [],
        requestBody: {
          required: true,
          content: { "application/json": { schema: plain(LoginBody) } },
        },
        responses: {
          "200": {
            description: "Signed in",
            headers: limitHeaders,
            content: { "application/json": { schema: plain(LoginReply) } },
          },
          "400": problem,
          "401": problem,
          "429": tooMany,
          "503": problem,
        },
      },
    },
    "/api/auth/logout": {
      post: {
        operationId: "gateway.auth.logout",
        tags: ["auth"],
        summary: "Sign out",
        description:
          "Ends the session of the bearer token: it is revoked on every gateway, and the token is refused " +
          "from then on (401), before it expires.\n\n**Who may call it:** any signed-in caller, for their " +
          "own session. Rate limited by policy `api`.",
        security: [{ bearer: [] }],
        responses: {
          "204": { description: "Signed out", headers: limitHeaders },
          "401": problem,
          "429": tooMany,
          "503": problem,
        },
      },
    },
    "/.well-known/jwks.json": {
      get: {
        operationId: "gateway.auth.jwks",
        tags: ["auth"],
        summary: "The keys that verify access tokens",
        description:
          "The public keys (JWK Set) of the access tokens' ES256 signatures, by `kid`.\n\n" +
          "**Who may call it:** anyone (no token); not rate limited.",
        security: [],
        responses: {
          "200": {
            description: "The JWK Set",
            content: { "application/json": { schema: plain(Jwks) } },
          },
          // As for any path: a URL that is not validly %-encoded.
          "400": problem,
          "503": problem,
        },
      },
    },
  };
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const keys = typeof route.permission === "string" ? [route.permission] : [...route.permission];
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      operationId: route.subject,
      tags: [tagOf(route)],
      summary: route.summary,
      description: describe(route),
      "x-svc-permission": keys[0],
      ...(keys.length > 1 ? { "x-svc-permission-alternatives": keys.slice(1) } : {}),
      ...(route.platformOnly ? { "x-svc-platform-scope-only": true } : {}),
      security: [{ bearer: [] }, { apiKey: [] }],
      parameters: parameters(route),
      ...requestBody(route),
      responses: {
        ...successResponses(route),
        "400": problem,
        "401": problem,
        "403": problem,
        "404": problem,
        ...(route.method !== "GET" ? { "409": problem, "422": problem } : {}),
        "429": tooMany,
        "503": problem,
        "504": problem,
      },
    };
  }
  const limitHeader = (description: string, example: string) => ({
    description,
    required: false,
    schema: { type: "string" },
    example,
  });
  return {
    openapi: "3.1.0",
    info: {
      title: "svc operator API",
      version: HOST_VERSION,
      description: API_DESCRIPTION,
      contact: { name: "The platform team operating this gateway" },
      license: { name: "Proprietary", identifier: "LicenseRef-svc-Proprietary" },
    },
    servers: [
      {
        url: "/",
        description:
          "This gateway: the operations' paths are relative to the origin that serves this document",
      },
    ],
    tags: TAGS.map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description:
            "An ES256-signed JWT access token from `POST /api/auth/login` (`accessToken`), verified against " +
            "the keys at `/.well-known/jwks.json`. Claims: `sub`, `svc_scope` (`platform` or `workspace`), " +
            "`workspace_key` for a workspace session, `permission` (the keys held) and `role`.",
        },
        apiKey: {
          type: "apiKey",
          in: "header",
          name: "X-Svc-Api-Key",
          description:
            "The break-glass key, accepted only where the deployment enables it " +
            "(`BackendHost__EnableBootstrapApiKeys`) and until it expires. It acts as role `host.api`: " +
            "platform reach, and only the keys an operator granted that role.",
        },
      },
      headers: {
        "RateLimit-Policy": limitHeader(
          "The limit this answer counts against (draft-ietf-httpapi-ratelimit-headers): policy name, `q` " +
            "the requests allowed per window, `w` the window in seconds. Absent while the limit is off.",
          '"api";q=600;w=60',
        ),
        RateLimit: limitHeader(
          "What is left of it: `r` the requests remaining in the current window, `t` the seconds until " +
            "it resets. Approximate across gateway replicas for policy `api` (they share counts within " +
            "about 100 ms); exact for `auth`.",
          '"api";r=599;t=42',
        ),
      },
      responses: {
        Problem: {
          description: "An RFC 9457 problem document",
          content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
        },
        TooManyRequests: {
          description: "Over the rate limit: refused at once, not queued. Wait `Retry-After` seconds.",
          headers: {
            "Retry-After": {
              description: "Seconds to wait: 60, a whole window",
              schema: { type: "integer" },
              example: 60,
            },
            ...limitHeaders,
          },
          content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
        },
      },
      schemas: {
        Problem: {
          type: "object",
          required: ["type", "title", "status"],
          properties: {
            type: { type: "string" },
            title: { type: "string" },
            status: { type: "integer" },
            detail: { type: "string" },
            code: { type: "string" },
            missingPermission: { type: "string" },
          },
        },
      },
    },
  };
}
