import type { NatsConnection } from "@nats-io/transport-node";
import type { Bus } from "@svc/bus";
import type { Db } from "@svc/db";
import { Counter, type Logger, type Registry } from "@svc/observability";
import type { ServiceDeps } from "@svc/runtime";
import Fastify, { type FastifyInstance } from "fastify";

import { parseTrustedProxies } from "./auth/rate-limiter.js";
import { connectionTimeouts, guardConnections } from "./connections.js";
import { edgeFactoryOptions, edgePlugin } from "./plugins/edge.js";
import { healthPlugin } from "./plugins/health.js";
import { metricsPlugin } from "./plugins/metrics.js";
import { operatorApiPlugin } from "./plugins/operator-api.js";
import { problemsPlugin } from "./plugins/problems.js";
import { tracingPlugin } from "./plugins/tracing.js";
import { registerUiAssets } from "./product-plugins/ui-assets.js";
import { type CacheLimits } from "./resolve-cache.js";
import { PublicWorkspaces } from "./routes/public-routes.js";
import { publicWorkspacePlugin } from "./routes/public-workspace.js";
import { surfacePlugin } from "./routes/surface.js";
import type { GatewayConfig, gatewaySettings } from "./settings.js";
import { validatorCompiler } from "./validation.js";

export interface GatewayDeps {
  readonly config: GatewayConfig;
  readonly log: Logger;
  readonly bus: Bus;
  readonly nc: NatsConnection;
  readonly db: Db;
  readonly metrics: Registry;
  readonly reprovision: ServiceDeps["reprovision"];
  readonly live: ServiceDeps<typeof gatewaySettings>["live"];
  /** Copies of what it keeps in NATS, for `/ready` (absent: not reported). */
  readonly storage?: ServiceDeps["storage"];
}

let requestCounter = 0;

/**
 * Builds the gateway's HTTP application without listening, so tests drive it with `app.inject()`.
 * Fastify's per-request logger is off: the hot path stays cheap, and errors are logged by the problems
 * plugin with our logger.
 */
export async function buildGateway(deps: GatewayDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const edge = edgeFactoryOptions(config.backendHost.problemsBaseUrl);
  const timeouts = connectionTimeouts({
    headersTimeoutMs: config.backendHost.headersTimeoutMs,
    requestTimeoutMs: 60_000,
    idleTimeoutMs: config.backendHost.idleConnectionTimeoutMs,
  });
  const app = Fastify({
    logger: false,
    bodyLimit: config.backendHost.maxRequestBodyBytes,
    // Idle and slow connections are closed, so that they cannot hold every file descriptor.
    ...timeouts,
    return503OnClosing: true,
    // A plugin that opens a bucket waits out a JetStream leader election (up to 30 s, `patiently`).
    pluginTimeout: 45_000,
    // Framework and HTTP-parser errors are problem documents too (plugins/edge.ts).
    ...edge,
    http: { ...edge.http, ...timeouts.http },
    // A caller's id is kept when it looks like one; otherwise a cheap process-unique id.
    genReqId: (request) => {
      const incoming = request.headers["x-request-id"];
      return typeof incoming === "string" && /^[\w.:-]{1,128}$/.test(incoming)
        ? incoming
        : `${process.pid.toString(36)}-${(++requestCounter).toString(36)}`;
    },
  });
  app.setValidatorCompiler(validatorCompiler({ lazy: config.nodeEnv === "production" }));
  const refused = new Counter({
    name: "svc_gateway_connections_refused_total",
    help: "Connections closed as they opened because their client address held BackendHost__MaxConnectionsPerClient already.",
    registers: [deps.metrics],
  });
  guardConnections(app.server, {
    maxPerClient: config.backendHost.maxConnectionsPerClient,
    firstRequestMs: config.backendHost.headersTimeoutMs,
    trusted: parseTrustedProxies(config.backendHost.trustedProxies),
    onRefused: () => refused.inc(),
  });
  // First, so every later hook and handler runs inside the request's span (when tracing is on).
  await app.register(tracingPlugin);
  await app.register(edgePlugin, { problemsBaseUrl: config.backendHost.problemsBaseUrl });
  await app.register(problemsPlugin, { problemsBaseUrl: config.backendHost.problemsBaseUrl, log: deps.log });
  await app.register(metricsPlugin, { registry: deps.metrics, bus: deps.bus });
  let draining = false;
  app.decorate("beginDrain", () => {
    draining = true;
  });
  // While draining, every answer closes its connection: a keep-alive client opens a
  // new one for its next request (which the load balancer sends elsewhere), so when the listener closes
  // no idle kept-alive connection is left to be reset under a request.
  app.addHook("onSend", async (_request, reply, payload) => {
    if (draining) void reply.header("connection", "close");
    return payload;
  });
  await app.register(healthPlugin, {
    db: deps.db,
    nc: deps.nc,
    storage: deps.storage,
    isDraining: () => draining,
  });
  // The operator API owns the authenticator: the public routes and the surface, registered after it, ask
  // its `identity` whether a caller is signed in.
  await app.register(operatorApiPlugin, {
    bus: deps.bus,
    nc: deps.nc,
    config,
    log: deps.log,
    reprovision: deps.reprovision,
    live: deps.live,
  });
  // What the resolver and the registry answer public routes is cached with one set of limits.
  const cache: CacheLimits = {
    ttlMs: config.backendHost.resolveCacheTtlMs,
    size: config.backendHost.resolveCacheSize,
    staleMs: config.backendHost.resolveStaleMs,
  };
  const workspaces = new PublicWorkspaces(deps.bus, cache);
  await app.register(publicWorkspacePlugin, {
    identity: app.identity,
    workspaces,
    bus: deps.bus,
    registry: deps.metrics,
    cache,
  });
  await app.register(surfacePlugin, {
    bus: deps.bus,
    identity: app.identity,
    workspaces,
    cache,
    log: deps.log,
  });
  await app.register(async (child) =>
    registerUiAssets(child, {
      nc: deps.nc,
      prefix: config.subjectPrefix,
      replicas: config.backendHost.natsReplicas,
      manifestUrl: config.backendHost.pluginManifestUrl,
      log: deps.log,
      reprovision: deps.reprovision,
    }),
  );
  return app;
}

declare module "fastify" {
  interface FastifyInstance {
    /** From now on /ready answers 503 (the listener keeps serving until it is closed). */
    beginDrain(): void;
  }
}
