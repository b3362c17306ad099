import { failed, type ServerTrace, startServerTrace, tracingEnabled, withContext } from "@svc/observability";
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from "fastify";
import fp from "fastify-plugin";

declare module "fastify" {
  interface FastifyRequest {
    /** The request's trace: its context, its `traceparent`, its span when sampled (tracing on only). */
    requestTrace?: ServerTrace;
  }
  interface FastifyContextConfig {
    /**
     * `on-demand`: the request does not run in its trace's context; the route enters it where it sends
     * something on (`inRequestTrace`). For a route whose usual answer needs no other service (a cached
     * resolve), entering a context per request was most of what tracing cost it.
     */
    traceContext?: "on-demand";
  }
}

const header = (value: string | string[] | undefined) => (typeof value === "string" ? value : undefined);

/** Runs `work` in the request's trace context (the route's own hop on an `on-demand` route). */
export function inRequestTrace<T>(request: FastifyRequest, work: () => T): T {
  return withContext(request.requestTrace?.context, work);
}

/** The route-level hook that runs the rest of a request (its hooks, its handler) in its trace's context. */
const enterTrace: onRequestHookHandler = (request, _reply, done) => {
  const started = request.requestTrace;
  if (started === undefined) done();
  else withContext(started.context, done);
};

/**
 * The HTTP edge of a trace (docs/adr/0017-tracing.md): each request continues the caller's trace (`traceparent`,
 * `tracestate`) or starts one, answers its `traceparent`, and runs in its context (so every NATS request
 * it sends carries it) from its route's first hook on, unless the route enters it on demand. Registered
 * only when tracing is on: with it off, no hook runs at all.
 */
export const tracingPlugin = fp(
  async (app: FastifyInstance) => {
    if (!tracingEnabled()) return;
    app.decorateRequest("requestTrace", undefined);
    app.addHook("onRequest", (request, reply, done) => {
      const started = startServerTrace(
        "gateway",
        header(request.headers.traceparent),
        header(request.headers.tracestate),
        () => `${request.method} ${request.routeOptions.url ?? "unmatched"}`,
      );
      if (started === undefined) return done();
      request.requestTrace = started;
      // Attributes only on a span that is kept: most requests are not sampled, and have no span at all.
      const span = started.span;
      if (span !== undefined && span.isRecording()) {
        span.setAttributes({
          "http.request.method": request.method,
          "url.path": request.url.split("?", 1)[0] ?? "/",
          "http.route": request.routeOptions.url ?? "",
          "svc.service": "gateway",
        });
      }
      void reply.header("traceparent", started.traceparent);
      done();
    });
    // Every route (all are registered after this plugin) enters the context first among its own hooks;
    // the edge's hooks before them (security headers, the Host check) send nothing on.
    app.addHook("onRoute", (route) => {
      if (route.config?.traceContext === "on-demand") return;
      const own = route.onRequest === undefined ? [] : [route.onRequest].flat();
      route.onRequest = [enterTrace, ...own];
    });
    app.addHook("onResponse", (request, reply, done) => {
      const span = request.requestTrace?.span;
      if (span !== undefined) {
        span.setAttribute("http.response.status_code", reply.statusCode);
        if (reply.statusCode >= 500) failed(span, new Error(`HTTP ${reply.statusCode}`));
        span.end();
      }
      done();
    });
  },
  { name: "svc-tracing" },
);
