/**
 * For the handlers' unit tests: calls an rbac route through its contract (the permission key, the
 * platform-only rule, the schemas of the request and reply) with the dependencies the test gives it, as
 * `serveRoute` does on the bus, without NATS or PostgreSQL.
 */
import type { Principal } from "@svc/bus";
import { callRoute, rbacRoutes } from "@svc/contracts";

export interface RouteCall {
  readonly params?: object;
  readonly query?: object;
  readonly body?: unknown;
}

/** What a handler answered, loosely typed for assertions. */
export interface RouteAnswer {
  readonly status: number;
  readonly body?: Record<string, unknown>;
}

export function routeCaller<D>(deps: D) {
  return <K extends keyof typeof rbacRoutes>(
    name: K,
    handler: (d: D, req: never) => Promise<unknown>,
    principal: Principal,
    request: RouteCall = {},
  ): Promise<RouteAnswer> =>
    callRoute(rbacRoutes[name], (req) => handler(deps, req as never) as never, {
      principal,
      params: request.params ?? {},
      query: request.query ?? {},
      body: request.body ?? null,
    } as never) as Promise<RouteAnswer>;
}
