import {
  extractContext,
  failed,
  type Span,
  SpanKind,
  startSpan,
  traceparentOf,
  tracingEnabled,
  withSpan,
} from "@svc/observability";
import type { FastifyInstance, FastifyRequest } from "fastify";
import fp from "fastify-plugin";

declare module "fastify" {
  interface FastifyRequest {
    /** The request's span (tracing on only). */
    traceSpan?: Span;
  }
}

const headerOf = (request: FastifyRequest) => ({
  get: (name: string) => {
    const value = request.headers[name];
    return typeof value === "string" ? value : undefined;
  },
});

/**
 * The HTTP edge of a trace (docs/adr/0017-tracing.md): each request continues the caller's trace (`traceparent`,
 * `tracestate`) or starts one, runs inside its span (so every NATS request it sends carries the context),
 * and answers its `traceparent`. Registered only when tracing is on: with it off, no hook runs at all.
 */
export const tracingPlugin = fp(
  async (app: FastifyInstance) => {
    if (!tracingEnabled()) return;
    app.addHook("onRequest", (request, reply, done) => {
      const parent = extractContext(headerOf(request));
      const span = startSpan("gateway", `${request.method} ${request.routeOptions.url ?? "unmatched"}`, {
        kind: SpanKind.SERVER,
        parent,
      });
      // Attributes only on a span that is kept: most requests are not sampled, and the sampler does not
      // read them.
      if (span?.isRecording()) {
        span.setAttributes({
          "http.request.method": request.method,
          "url.path": request.url.split("?", 1)[0] ?? "/",
          "http.route": request.routeOptions.url ?? "",
          "svc.service": "gateway",
        });
      }
      request.traceSpan = span;
      const traceparent = traceparentOf(span);
      if (traceparent !== undefined) void reply.header("traceparent", traceparent);
      // The rest of the request (hooks, handler) runs with its span current.
      withSpan(span, done, parent);
    });
    app.addHook("onResponse", (request, reply, done) => {
      const span = request.traceSpan;
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
