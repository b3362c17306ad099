/**
 * Serving and calling an operator route by its contract. The service side checks every request against
 * the route's schemas and then the route's guard (permission key, platform scope, reach of every
 * workspace named in the path or query: `authorise` in @svc/access, the gateway's own check) before the
 * handler runs (one place, whoever the caller), and in development and
 * tests checks the reply against the reply schema too, so the OpenAPI description cannot drift from what
 * the service answers.
 */
import { authorise } from "@svc/access";
import { type Bus, type HandlerContext, Header, type RequestOptions } from "@svc/bus";
import { InternalError } from "@svc/errors";

import { checkReplies } from "./checks.js";
import type { ReplyOfRoute, RequestOfRoute, RouteContract, RouteSpec } from "./route.js";

export type RouteHandler<C> = (
  request: RequestOfRoute<C>,
  context: HandlerContext,
) => Promise<ReplyOfRoute<C>> | ReplyOfRoute<C>;

/**
 * A route's handler written as a service's module function: its dependencies `D` first, then the request;
 * both types come from the route's contract (`RouteHandlerWith<RbacDeps, RbacRoutes["users.list"]>`).
 */
export type RouteHandlerWith<D, C> = (deps: D, request: RequestOfRoute<C>) => Promise<ReplyOfRoute<C>>;

/** Serves a route on its subject, in the service's queue group. */
export function serveRoute<S extends RouteSpec, Subject extends string>(
  bus: Bus,
  route: RouteContract<S, Subject>,
  handler: RouteHandler<NoInfer<S>>,
): void {
  bus.serve(
    route.subject,
    async (received: RequestOfRoute<S>, context) => {
      // The principal is believed only as the gateway signed it.
      const verifier = bus.principalVerifier;
      if (verifier === undefined) throw new InternalError();
      const principal = await verifier.verify(context.header(Header.Principal), received.principal);
      const request = { ...received, principal };
      authorise(principal, route, request.params, request.query);
      // A write sent with an Idempotency-Key runs once: its outcome is kept with its change.
      const key = context.header(Header.IdempotencyKey);
      const fingerprint = context.header(Header.IdempotencyFingerprint);
      const keyed = bus.keyedWrites;
      const reply =
        key !== undefined && fingerprint !== undefined && keyed !== undefined && route.method !== "GET"
          ? await keyed.run(
              `${principal.subject}\n${key}`,
              fingerprint,
              async () => handler(request, context),
              { withholdReply: route.secretReply === true },
            )
          : await handler(request, context);
      if (checkReplies) route.checkReply(reply);
      return reply;
    },
    { decode: route.decode },
  );
}

/**
 * A service's implementation of its routes: one handler per route of its contract, typed by it, so a
 * route without a handler, or a handler whose request or reply breaks the route's schemas, does not
 * compile.
 */
export type RouteImplementation<Routes> = {
  readonly [K in keyof Routes]: RouteHandler<Routes[K]>;
};

/** Serves every route of a service's contract (`defineRoutes`) with its implementation. */
export function serveRoutes<const Routes extends Record<string, RouteContract>>(
  bus: Bus,
  routes: Routes,
  implementation: RouteImplementation<Routes>,
): void {
  for (const name of Object.keys(routes)) {
    const route = routes[name] as RouteContract;
    // Each handler is typed by its own route above; here they are served one like another.
    serveRoute(bus, route, implementation[name] as RouteHandler<RouteSpec>);
  }
}

/**
 * Forwards a route's request to the service that owns it (503 when none serves it yet), with its
 * principal signed by the bus's signer (the gateway's).
 */
export async function requestRoute<S extends RouteSpec, Subject extends string>(
  bus: Bus,
  route: RouteContract<S, Subject>,
  request: RequestOfRoute<S>,
  options?: RequestOptions,
): Promise<ReplyOfRoute<S>> {
  const signer = bus.principalSigner;
  const headers =
    signer === undefined
      ? options?.headers
      : { ...options?.headers, [Header.Principal]: await signer.sign(request.principal) };
  const reply = await bus.request(route.subject, request, { ...options, ...(headers ? { headers } : {}) });
  // The owner checks its replies against the route's schema in development and tests.
  return reply as ReplyOfRoute<S>;
}
