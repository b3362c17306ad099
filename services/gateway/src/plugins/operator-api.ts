/**
 * The operator API: every route contract (@svc/contracts) behind the guard, sign-in, the JWKS and the OpenAPI
 * description. Per request, in this order: rate limit (api policy) → authentication → guard (permission,
 * platform scope, workspace reach), all in `onRequest` so that an anonymous or forbidden caller learns
 * nothing from input validation; then schema validation (400 listing each violation); then forwarding to
 * the owning service over NATS (503/504 when it is missing or slow).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { authorise, openRevocationBucket, RevocationList } from "@svc/access";
import {
  type Bus,
  ensureBucket,
  Header,
  isNatsConnected,
  patiently,
  type Principal,
  type RouteReply,
} from "@svc/bus";
import { messageClient, OPERATOR_ROUTES, rbacMessages, requestRoute, WorkspaceStates } from "@svc/contracts";
import { ErrorCode, NotFoundError, RateLimitedError, SvcError, UnauthenticatedError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import { pluginSchemas } from "@svc/plugin-package";
import { growingLru, idempotencyBucket, rateLimitBucket, type ServiceDeps } from "@svc/runtime";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";

import { Authenticator } from "../auth/authenticator.js";
import {
  clientAddress,
  isTrustedProxy,
  limitGroup,
  normaliseAddress,
  parseTrustedProxies,
  RateLimiter,
  rateLimitHeaders,
} from "../auth/rate-limiter.js";
import { type Claim, Idempotency, IDEMPOTENCY_TTL_MS } from "../idempotency.js";
import { ARCHIVE_TYPES, PackageUploads } from "../product-plugins/package-uploads.js";
import { registerPluginRoutes } from "../product-plugins/routes.js";
import { LoginBody } from "../routes/auth-schemas.js";
import { MediaTransfers } from "../routes/media.js";
import { buildOpenApi } from "../routes/openapi.js";
import type { PublicIdentity } from "../routes/public-routes.js";
import type { GatewayConfig, gatewaySettings } from "../settings.js";
import { apiDocsPlugin } from "./api-docs.js";

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    /**
     * How the public routes recognise a signed-in caller (svc-operator-api owns the authenticator):
     * register this plugin before the public routes and the surface, which take it.
     */
    readonly identity: PublicIdentity;
  }
}

export interface OperatorApiOptions {
  readonly bus: Bus;
  readonly nc: NatsConnection;
  readonly config: GatewayConfig;
  readonly log: Logger;
  readonly reprovision: ServiceDeps["reprovision"];
  readonly live: ServiceDeps<typeof gatewaySettings>["live"];
}

/** Whose an Idempotency-Key is: the subject within its session's scope and workspace. */
function idempotencyOwner(principal: Principal): string {
  return `${principal.subject}\n${principal.scope ?? ""}\n${principal.workspaceKey ?? ""}`;
}

export const operatorApiPlugin = fp<OperatorApiOptions>(
  async (app: FastifyInstance, { bus, nc, config, log, reprovision, live }) => {
    const b = config.backendHost;
    // Both buckets are provisioned again after a NATS reconnect (the rate limits live in memory, so a
    // restarted server always comes back without them), and watched again.
    const openRevocations = () =>
      openRevocationBucket(nc, config.subjectPrefix, b.accessTokenLifetimeSeconds * 1000, b.natsReplicas);
    // Sign-in waits on this bucket: 1.5 s at most per operation, so that while JetStream recovers after a
    // restart sign-in answers 503 quickly and works again as soon as it can.
    const openLimits = () =>
      ensureBucket(
        nc,
        rateLimitBucket(config.subjectPrefix),
        { history: 1, ttl: 120_000, storage: "memory", replicas: b.natsReplicas },
        1_500,
      );
    const revocations = new RevocationList();
    // At start, a cluster may still be electing a leader (a node just lost): wait for it, within limits.
    await patiently("revocations watch", async () => revocations.start(await openRevocations()), log);
    // The limits are read per request: a change at run time (PUT /api/config/values) applies at once.
    const limits = new RateLimiter(
      await patiently("rate-limit bucket", openLimits, log),
      {
        get auth() {
          return live.backendHost.rateLimitAuthPerMinute;
        },
        get api() {
          return live.backendHost.rateLimitApiPerMinute;
        },
        get account() {
          return live.backendHost.rateLimitAuthPerAccountPerMinute;
        },
      },
      log,
    );
    await patiently("rate-limit watch", () => limits.start(), log);
    const openIdempotency = () =>
      ensureBucket(nc, idempotencyBucket(config.subjectPrefix), {
        history: 1,
        ttl: IDEMPOTENCY_TTL_MS,
        replicas: b.natsReplicas,
      });
    let idempotencyKv = await patiently("idempotency bucket", openIdempotency, log);
    const idempotency = new Idempotency(() => idempotencyKv, b.requestTimeoutMs * 2 + 5_000);
    reprovision("gateway buckets", async () => {
      await revocations.restart(await openRevocations());
      await openLimits();
      await limits.restartWatch();
      idempotencyKv = await openIdempotency();
    });
    const trusted = parseTrustedProxies(b.trustedProxies);
    const authenticator = new Authenticator(bus, config, revocations, new WorkspaceStates(bus, log), log);
    const signedIn = async (request: FastifyRequest, workspaceKey: string) => {
      try {
        const principal = await authenticator.authenticate(
          header(request, "authorization"),
          header(request, "x-svc-api-key"),
        );
        if (principal === null) return false;
        return (
          principal.scope === "platform" ||
          (principal.scope === "workspace" && principal.workspaceKey === workspaceKey)
        );
      } catch {
        return false;
      }
    };
    app.decorate("identity", { signedIn } satisfies PublicIdentity);
    app.addHook("onClose", async () => {
      limits.stop();
      revocations.stop();
    });
    app.decorateRequest("principal", null);

    /**
     * X-Forwarded-For from a peer that is not a trusted proxy is ignored: behind an ingress without
     * `BackendHost__TrustedProxies` every client would share the ingress's sign-in bucket (five failed
     * sign-ins a minute from anyone lock everyone out). Said once per process.
     */
    let warnedUntrustedForwarding = false;
    const warnUntrustedForwarding = (request: FastifyRequest) => {
      const peer = normaliseAddress(request.socket.remoteAddress ?? "");
      if (peer === null || isTrustedProxy(peer, trusted)) return;
      warnedUntrustedForwarding = true;
      log.warn(
        { peer: peer.toString() },
        "X-Forwarded-For came from a peer that is not a trusted proxy and is ignored: every client behind it counts as that peer for the rate limits; set BackendHost__TrustedProxies__N to your ingress's addresses",
      );
    };

    /**
     * The client a limit counts against: its address (an IPv6 address's /64). Kept for recent peers and
     * short X-Forwarded-For values: parsing the addresses at every request took about 2 % of an operator
     * GET's CPU. A long header is worked out each time, so that no client can fill the cache with it.
     */
    const clients = growingLru<string, string>(10_000);
    const client = (request: FastifyRequest) => {
      const xff = request.headers["x-forwarded-for"];
      if (xff !== undefined && !warnedUntrustedForwarding) warnUntrustedForwarding(request);
      const remote = request.socket.remoteAddress ?? "";
      const forwarded = Array.isArray(xff) ? xff[0] : xff;
      const memo = forwarded === undefined ? remote : `${remote} ${forwarded}`;
      let group = memo.length <= 256 ? clients.get(memo) : undefined;
      if (group === undefined) {
        group = limitGroup(clientAddress(remote, forwarded, trusted));
        if (memo.length <= 256) clients.set(memo, group);
      }
      return group;
    };
    const header = (request: FastifyRequest, name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };

    /** The api policy's limit for the client: its headers on the answer, a 429 past it. */
    const limitApi = (request: FastifyRequest, reply: FastifyReply) => {
      const limit = limits.hit("api", client(request));
      void reply.headers(rateLimitHeaders("api", limit));
      if (!limit.allowed) throw new RateLimitedError("api");
    };
    /**
     * The api rate limit, then authentication: the caller, or a 429/401. The answer carries the limit's
     * RateLimit-Policy and RateLimit headers either way.
     */
    const identify = async (request: FastifyRequest, reply: FastifyReply): Promise<Principal> => {
      limitApi(request, reply);
      const principal = await authenticator.authenticate(
        header(request, "authorization"),
        header(request, "x-svc-api-key"),
      );
      if (principal === null) throw new UnauthenticatedError();
      return principal;
    };

    const uploads = new PackageUploads(nc, config.subjectPrefix, b.natsReplicas);
    const media = new MediaTransfers(nc, config.subjectPrefix, b.natsReplicas);
    const addRoute = (target: FastifyInstance, route: (typeof OPERATOR_ROUTES)[number]) =>
      target.route({
        method: route.method,
        url: route.path,
        // What a 415 names as the route's content types.
        config: {
          accepts:
            route.upload === true
              ? [...ARCHIVE_TYPES, "multipart/form-data"]
              : route.upload === "media"
                ? ["multipart/form-data"]
                : ["application/json"],
        },
        schema: {
          ...(route.params ? { params: route.params } : {}),
          ...(route.query ? { querystring: route.query } : {}),
          // An upload's body is the archive or the file; what is forwarded is checked by the owning service.
          ...(route.body && route.upload === undefined ? { body: route.body } : {}),
        },
        onRequest: async (request, reply) => {
          // Operator answers carry personal data: never stored by a cache, errors included.
          void reply.header("cache-control", "no-store");
          const principal = await identify(request, reply);
          authorise(
            principal,
            route,
            request.params as Record<string, unknown>,
            request.query as Record<string, unknown>,
          );
          request.principal = principal;
        },
        handler: async (request, reply) => {
          const principal = request.principal as Principal;
          // A media upload is read and described first; its bytes are stored only once the request is
          // known to run, so a replay or a refused key stores nothing.
          const file = route.upload === "media" ? await media.read(request) : undefined;
          const forwarded = {
            principal,
            params: (request.params ?? {}) as Record<string, string>,
            query: (request.query ?? {}) as Record<string, unknown>,
            body:
              route.upload === true
                ? await uploads.put(request, b.maxPackageUploadBytes)
                : file !== undefined
                  ? { media: file.described }
                  : (request.body ?? null),
          };
          const key = header(request, "idempotency-key");
          const writes = route.method !== "GET";
          let claim: Claim | undefined;
          if (writes && key !== undefined) {
            Idempotency.validate(key);
            // Keys are the caller's own: per subject, session scope and workspace. An upload's fingerprint
            // is its content hash, size, type and name, so a retry of the same file replays.
            try {
              claim = await idempotency.claim(
                idempotencyOwner(principal),
                key,
                {
                  method: route.method,
                  path: request.url.split("?")[0],
                  query: forwarded.query,
                  body: forwarded.body,
                },
                { withholdReply: route.secretReply === true },
              );
            } catch (error) {
              if (error instanceof SvcError) throw error;
              // The key store (NATS KV) cannot be read: nothing ran; the client retries (found by make chaos
              // right after a NATS restart: a 500 before).
              log.warn({ error: (error as Error).message }, "idempotency keys unavailable");
              throw new SvcError(
                ErrorCode.ServiceUnavailable,
                "Idempotency-Key cannot be checked right now; nothing was done, try again shortly.",
                { extensions: { service: "idempotency" } },
              );
            }
            if (claim.kind === "replay") {
              if (claim.error) {
                void reply.header("idempotency-replayed", "true");
                throw claim.error;
              }
              return sendReply(reply, claim.reply);
            }
          }
          const objectName = file === undefined ? undefined : await media.store(file.bytes);
          if (file !== undefined) forwarded.body = { media: { ...file.described, objectName } };
          let result;
          try {
            result = await requestRoute(bus, route, forwarded, {
              requestId: request.id,
              ...(claim?.kind === "run"
                ? {
                    headers: {
                      [Header.IdempotencyKey]: claim.forward.key,
                      [Header.IdempotencyFingerprint]: claim.forward.fingerprint,
                    },
                  }
                : {}),
            });
          } catch (error) {
            if (claim?.kind === "run")
              await claim
                .fail(error)
                .catch((err: unknown) =>
                  log.warn({ err }, "could not release an Idempotency-Key; it is taken as abandoned later"),
                );
            // A refused upload leaves no bytes behind. After a time-out or a failure of the platform the
            // record may exist, so the bytes stay (a later delete of the record removes them).
            if (objectName !== undefined && error instanceof SvcError && error.status < 500) {
              await media.remove(objectName).catch((err: unknown) => {
                log.warn({ err, objectName }, "could not remove the bytes of a refused upload");
              });
            }
            throw error;
          }
          // The write happened: its answer is sent even when it cannot be kept (a retry then waits for the
          // claim to be taken as abandoned, 409 meanwhile).
          if (claim?.kind === "run")
            await claim
              .finish(result)
              .catch((err: unknown) => log.warn({ err }, "could not keep the answer of an Idempotency-Key"));
          // A download's reply describes the file; its bytes come from the media store.
          if (route.download === true && result.status === 200) {
            return media.send(request, reply, result.body as Parameters<MediaTransfers["send"]>[2]);
          }
          return sendReply(reply, result);
        },
      });
    for (const route of OPERATOR_ROUTES) {
      if (route.upload === undefined) addRoute(app, route);
    }
    // Upload routes live in their own context: only they accept archive bodies, up to their own limit.
    await app.register(async (child) => {
      await PackageUploads.acceptArchives(child, b.maxPackageUploadBytes);
      for (const route of OPERATOR_ROUTES) if (route.upload === true) addRoute(child, route);
    });
    await app.register(async (child) => {
      await MediaTransfers.acceptUploads(child, b.maxMediaUploadBytes);
      for (const route of OPERATOR_ROUTES) if (route.upload === "media") addRoute(child, route);
    });

    await registerPluginRoutes(app, {
      bus,
      log,
      identify,
      send: sendReply,
      timeoutMs: Math.min(b.pluginCallTimeoutMs, b.requestTimeoutMs),
    });

    function sendReply(reply: FastifyReply, result: RouteReply) {
      if (result.headers) void reply.headers(result.headers);
      void reply.code(result.status);
      return result.body === undefined ? reply.send() : reply.send(result.body);
    }

    /** One sign-in attempt counted exactly, per client or per account; 503 without the shared counter. */
    const countSignIn = async (policy: "auth" | "account", who: string) => {
      try {
        // Fail fast while NATS is down: the shared counter (and rbac) cannot be reached.
        if (!isNatsConnected(nc)) throw new Error("the NATS connection is down");
        return await limits.hitExact(policy, who);
      } catch (err) {
        // Fail closed: without the shared counter, sign-in could be brute-forced across replicas.
        log.warn({ error: (err as Error).message }, "login rate limiter unavailable");
        throw new SvcError(ErrorCode.ServiceUnavailable, "Sign-in is unavailable; try again shortly.", {
          extensions: { service: "rate-limiter" },
        });
      }
    };

    const rbac = messageClient(bus, rbacMessages);
    app.post("/api/auth/login", { schema: { body: LoginBody } }, async (request, reply) => {
      const decision = await countSignIn("auth", client(request));
      void reply.headers(rateLimitHeaders("auth", decision));
      if (!decision.allowed) throw new RateLimitedError("auth");
      const body = request.body as {
        username?: string;
        userName?: string;
        password: string;
        workspaceKey?: string | null;
      };
      const userName = body.username ?? body.userName;
      if (userName === undefined) {
        throw new SvcError(ErrorCode.ValidationFailed, "Invalid input: /body/username is required", {
          extensions: { errors: [{ field: "/body/username", message: "is required" }] },
        });
      }
      // Per account too: guessing one account's password from many addresses is
      // limited as guessing from one. User names compare case-insensitively, so the count does too.
      const forAccount = await countSignIn("account", userName.trim().toLowerCase());
      if (!forAccount.allowed) {
        throw new SvcError(
          ErrorCode.RateLimited,
          "Too many sign-in attempts for this account; try again in a minute.",
          { extensions: { policy: "account" } },
        );
      }
      const result = await rbac.request(
        "auth.login",
        { userName, password: body.password, workspaceKey: body.workspaceKey ?? null },
        { requestId: request.id },
      );
      return reply.header("cache-control", "no-store").send(result);
    });

    // Sign-out: the bearer token's session is revoked on every gateway (204); a token already revoked or
    // not valid is 401 like anywhere else.
    app.post("/api/auth/logout", async (request, reply) => {
      // The api policy's limit, as for every route that verifies a token.
      limitApi(request, reply);
      const found = await authenticator.session(header(request, "authorization"));
      if (found === null) throw new UnauthenticatedError();
      await rbac.request(
        "auth.logout",
        { sessionId: found.sessionId, subject: found.principal.subject },
        { requestId: request.id },
      );
      return reply.code(204).header("cache-control", "no-store").send();
    });

    app.get("/.well-known/jwks.json", async (_request, reply) => {
      const jwks = await rbac.request("keys.jwks", {});
      return reply.header("cache-control", "public, max-age=300").send(jwks);
    });

    // The JSON Schemas of a plugin package's files, for editors (docs/plugins.md): the same documents
    // `make plugin-schemas` writes to docs/schemas/, made from the package's own schemas.
    const schemas = pluginSchemas();
    app.get<{ Params: { file: string } }>("/schemas/plugins/:file", async (request, reply) => {
      const schema = Object.hasOwn(schemas, request.params.file) ? schemas[request.params.file] : undefined;
      if (schema === undefined) throw new NotFoundError(`No schema '${request.params.file}'.`);
      return reply
        .type("application/schema+json")
        .header("cache-control", "public, max-age=300")
        .send(JSON.stringify(schema));
    });

    const document = buildOpenApi(OPERATOR_ROUTES);
    // Kept as UTF-8 bytes: as a string it held two bytes a character (its text is not all Latin-1), and
    // each answer encoded it again.
    const openapi = Buffer.from(JSON.stringify(document));
    if (b.enableApiDocs ?? config.nodeEnv !== "production") {
      await app.register(apiDocsPlugin, { document });
    }
    app.get("/openapi.json", async (_request, reply) =>
      reply
        .type("application/json; charset=utf-8")
        .header("cache-control", "public, max-age=300")
        .send(openapi),
    );
  },
  { name: "svc-operator-api", fastify: "5.x" },
);
