import type { Bus } from "@svc/bus";
import { messageClient, resolverBroadcasts, type ResolveResult, resolverMessages } from "@svc/contracts";
import { Counter, type Registry } from "@svc/observability";
import { normalisePath } from "@svc/workspace";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";

import { inRequestTrace } from "../plugins/tracing.js";
import { type CacheLimits, followedCache } from "../resolve-cache.js";
import {
  firstHeader,
  type PublicIdentity,
  type PublicWorkspaces,
  registerPublicRoutes,
  requestHost,
} from "./public-routes.js";

export interface PublicWorkspaceOptions {
  readonly bus: Bus;
  readonly registry: Registry;
  readonly cache: CacheLimits;
  /** Whether a request is signed in (for Authenticated workspaces). */
  readonly identity: PublicIdentity;
  /** The visible workspaces, shared with the surface. */
  readonly workspaces: PublicWorkspaces;
}

const UNRESOLVED_BODY = Buffer.from(
  JSON.stringify({ resolved: false, workspaceKey: null } satisfies ResolveResult),
);
const JSON_TYPE = "application/json; charset=utf-8";

/**
 * The anonymous public workspace routes (docs/operator-guide.md "Public routes"):
 * `resolve`, `context`, `bootstrap.js`, `ui-chain`, `theme`, `navigation`. Host from `X-Forwarded-Host`
 * or `Host`; path from `X-Forwarded-Uri` (resolve) or the route's own rule. What the resolver and the plugin
 * registry answer is cached here (ResolveCache) and dropped on their change broadcasts.
 */
export const publicWorkspacePlugin = fp<PublicWorkspaceOptions>(
  async (app: FastifyInstance, { bus, registry, cache: limits, identity, workspaces }) => {
    const resolver = messageClient(bus, resolverMessages);
    const cache = followedCache(bus, [resolverBroadcasts["cache.invalidate"]], limits);
    const lookups = new Counter({
      name: "svc_gateway_resolve_cache_lookups_total",
      help: "Workspace resolutions at the gateway, by whether the cache answered.",
      labelNames: ["result"] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ result: "hit" }, cache.hits);
        this.inc({ result: "miss" }, cache.misses);
        this.inc({ result: "stale" }, cache.staleServed);
      },
    });
    void lookups;

    registerPublicRoutes(app, bus, identity, workspaces, limits);

    // The ingress asks this before every request it forwards: its context is entered only for a miss.
    app.get(
      "/workspace/public/resolve",
      { config: { traceContext: "on-demand" } },
      async (request, reply) => {
        const host = requestHost(request);
        reply.header("content-type", JSON_TYPE).header("cache-control", "no-store");
        if (host === null) return reply.send(UNRESOLVED_BODY);
        const path = normalisePath(firstHeader(request.headers["x-forwarded-uri"]));
        const body = await cache.load(`${host}\n${path}`, () =>
          inRequestTrace(request, () =>
            resolver.requestRaw("workspace.resolve", { host, path }, { requestId: request.id }),
          ),
        );
        return reply.send(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
      },
    );
  },
  { name: "svc-public-workspace", fastify: "5.x" },
);
