/**
 * The interactive API reference at `/api/docs`: Swagger UI, served from the
 * `@fastify/swagger-ui` package itself (no CDN), over the same OpenAPI document as `/openapi.json`. On by
 * default except in production, where `BackendHost__EnableApiDocs=true` turns it on. The page loads only
 * its own scripts and styles, so the gateway's content security policy (helmet's, `script-src 'self'`)
 * holds; "Try it out" calls this gateway (the document's server is `/`).
 */
import type { FastifyInstance } from "fastify";

export const API_DOCS_PATH = "/api/docs";

export interface ApiDocsOptions {
  /** The OpenAPI document (buildOpenApi's). */
  readonly document: Record<string, unknown>;
}

/** Registered in a context of its own (not fastify-plugin): its hook runs for the reference's routes only. */
export async function apiDocsPlugin(app: FastifyInstance, { document }: ApiDocsOptions): Promise<void> {
  // Loaded only when the reference is on (off in production by default): Swagger UI and its static-file
  // server would otherwise hold about 2 MB of every gateway's memory.
  const [{ default: swagger }, { default: swaggerUi }] = await Promise.all([
    import("@fastify/swagger"),
    import("@fastify/swagger-ui"),
  ]);
  // Static mode: the document is ours, built from the route contracts; nothing is collected from routes.
  await app.register(swagger, {
    mode: "static",
    specification: { document: document as never },
  });
  await app.register(swaggerUi, {
    routePrefix: API_DOCS_PATH,
    uiConfig: {
      // Operations listed under their tags, a filter box that searches tags, links to each operation.
      docExpansion: "list",
      deepLinking: true,
      filter: true,
      displayOperationId: false,
      tryItOutEnabled: false,
      persistAuthorization: false,
      validatorUrl: null,
    },
    staticCSP: false,
  });
  // The reference is documentation: cacheable for a while.
  app.addHook("onSend", async (_request, reply) => {
    void reply.header("cache-control", "public, max-age=300");
  });
}
