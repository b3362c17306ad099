import type { TSchema } from "@sinclair/typebox";
import type { RouteContract } from "@svc/contracts";
import { HOST_VERSION } from "@svc/runtime";

const problem = { $ref: "#/components/responses/Problem" };

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
  if (route.download === true) {
    return {
      "200": {
        description: "The file's bytes (Range requests answer 206)",
        content: { "application/octet-stream": { schema: { type: "string", contentEncoding: "binary" } } },
      },
      "206": { description: "The requested byte range" },
    };
  }
  if (route.reply === undefined) return { "204": { description: "Done; no body" } };
  const content = { "application/json": { schema: plain(route.reply) } };
  if (route.method === "GET") return { "200": { description: "Success", content } };
  return {
    "200": { description: "Success", content },
    "201": {
      description: "Created (when the request created the resource)",
      headers: { Location: { schema: { type: "string" } } },
      content,
    },
  };
}

/**
 * The OpenAPI 3.1 description of the operator API, derived from the route contracts (@svc/contracts), as the routes and the
 * guard are; each operation names its permission key (`x-svc-permission`). Public routes are excluded, as spec
 * 4.1 requires.
 */
export function buildOpenApi(routes: readonly RouteContract[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const keys = typeof route.permission === "string" ? [route.permission] : [...route.permission];
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      operationId: route.subject,
      summary: route.summary,
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
        "429": problem,
        "503": problem,
        "504": problem,
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: { title: "svc operator API", version: HOST_VERSION },
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        apiKey: { type: "apiKey", in: "header", name: "X-Svc-Api-Key" },
      },
      responses: {
        Problem: {
          description: "An RFC 9457 problem document",
          content: {
            "application/problem+json": {
              schema: {
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
        },
      },
    },
  };
}
