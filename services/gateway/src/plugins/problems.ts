import {
  ErrorCode,
  PROBLEM_CONTENT_TYPE,
  SvcError,
  toProblem,
  ValidationError,
  type Violation,
} from "@svc/errors";
import type { Logger } from "@svc/observability";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";

import { inRequestTrace } from "./tracing.js";

export interface ProblemsOptions {
  readonly problemsBaseUrl: string;
  readonly log: Logger;
}

/**
 * Asked, in the order added, for a request no route matched, before the 404 or 405 problem: the public
 * surface's redirects and shell pages. Answers the reply, or undefined to pass.
 */
export type NotFoundFallback = (
  request: FastifyRequest,
  reply: FastifyReply,
) => Promise<FastifyReply | undefined>;

declare module "fastify" {
  interface FastifyInstance {
    /** Adds a fallback the not-found handler asks before it answers 404 or 405 (svc-problems). */
    addNotFoundFallback(fallback: NotFoundFallback): void;
  }
}

/** Fastify's own client errors (body too large, bad JSON, bad media type) as our errors. */
function fromFastifyError(error: FastifyError): SvcError | undefined {
  if (error.validation) {
    const violations: Violation[] = error.validation.map((v) => ({
      field: `/${error.validationContext ?? "request"}${v.instancePath}${
        v.keyword === "required"
          ? `/${String((v.params as { missingProperty?: string }).missingProperty)}`
          : ""
      }`,
      message: v.message ?? "is invalid",
    }));
    return new ValidationError(violations);
  }
  const status = error.statusCode ?? 500;
  if (status >= 500) return undefined;
  const code =
    status === 413
      ? ErrorCode.PayloadTooLarge
      : status === 415
        ? ErrorCode.UnsupportedMediaType
        : status === 404
          ? ErrorCode.NotFound
          : status === 405
            ? ErrorCode.MethodNotAllowed
            : ErrorCode.BadRequest;
  // Fastify's messages for client errors are fixed texts, safe to show.
  return new SvcError(code, error.message);
}

/**
 * The one place where errors become HTTP: every error reply is an RFC 9457 problem document
 * (`application/problem+json`). Unexpected errors are logged with their stack and answered with a
 * generic 500 that reveals nothing.
 */
export const problemsPlugin = fp<ProblemsOptions>(
  async (app: FastifyInstance, options) => {
    app.setErrorHandler((error: FastifyError, request, reply) => {
      let svcError = error instanceof SvcError ? error : fromFastifyError(error);
      if (svcError?.code === ErrorCode.UnsupportedMediaType && !(error instanceof SvcError)) {
        // Say which content types the route takes.
        const accepts = (request.routeOptions.config as { accepts?: string[] } | undefined)?.accepts ?? [
          "application/json",
        ];
        const sent = (request.headers["content-type"] ?? "").split(";")[0]?.trim() || "none";
        svcError = new SvcError(
          ErrorCode.UnsupportedMediaType,
          `Content-Type ${sent} is not accepted here; send ${accepts.join(", ")}.`,
          { extensions: { accepted: accepts } },
        );
      }
      if (svcError === undefined || svcError.code === ErrorCode.Internal) {
        // In the request's trace (a route that enters it on demand may fail outside it).
        inRequestTrace(request, () =>
          options.log.error({ err: error, method: request.method, url: request.url }, "request failed"),
        );
      }
      const problem = toProblem(svcError ?? error, options.problemsBaseUrl, request.url.split("?")[0]);
      // Retry-After: a whole window. The RateLimit header set before the refusal says when it actually
      // resets.
      if (problem.status === 429) reply.header("retry-after", "60");
      // A service or NATS that is away is usually back within seconds (a restart, a reconnect).
      if (problem.status === 503) reply.header("retry-after", "5");
      if (problem.status === 401) {
        // RFC 6750: name the scheme; say the token was refused when one was sent.
        reply.header(
          "www-authenticate",
          request.headers.authorization === undefined
            ? 'Bearer realm="svc"'
            : 'Bearer realm="svc", error="invalid_token"',
        );
      }
      return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem);
    });
    const fallbacks: NotFoundFallback[] = [];
    app.decorate("addNotFoundFallback", (fallback: NotFoundFallback) => void fallbacks.push(fallback));
    app.setNotFoundHandler(async (request, reply) => {
      for (const fallback of fallbacks) {
        const handled = await fallback(request, reply);
        if (handled !== undefined) return handled;
      }
      const path = request.url.split("?")[0] ?? "/";
      // A known path asked with another method: 405 naming the methods it has (RFC 9110 15.5.6).
      // (A route that exists for this method but found nothing, a static file say, is a plain 404.)
      const listed = app.allowedMethods(request.url);
      const allowed = (listed as string[]).includes(request.method) ? [] : listed;
      const error =
        allowed.length > 0
          ? new SvcError(ErrorCode.MethodNotAllowed, `${request.method} is not allowed on ${path}.`, {
              extensions: { allow: allowed },
            })
          : new SvcError(ErrorCode.NotFound, `No route for ${request.method} ${path}.`);
      const problem = toProblem(error, options.problemsBaseUrl, path);
      if (allowed.length > 0) reply.header("allow", allowed.join(", "));
      return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem);
    });
  },
  // Its 404/405 answers list a path's methods through the edge's route table.
  {
    name: "svc-problems",
    fastify: "5.x",
    dependencies: ["svc-edge"],
    decorators: { fastify: ["allowedMethods"] },
  },
);
