/**
 * What the gateway refuses before any route sees a request, and the shape of every refusal: each one is an
 * RFC 9457 problem document, including the errors Fastify and Node's HTTP parser raise themselves.
 *
 * - Input that cannot be stored or forwarded safely: a NUL character in any path, query or body string
 *   (PostgreSQL text cannot hold it), and JSON nested deeper than MAX_DEPTH (it would overflow the stack
 *   of the validators and of the bus encoder). 400, naming the field.
 * - Framework errors: a URL whose %-encoding is invalid (400), a path parameter longer than the router
 *   accepts (414); Node's own client errors: header section too large, e.g. a 70 KB query (431), request
 *   timeout (408), malformed request (400).
 * - A known path with an unsupported method: 405 with `Allow`, instead of 404.
 * - An HTTP/1.1 request without `Host`: 400 (Node's own refusal would have no body).
 * - Security headers on every response (helmet's: `X-Content-Type-Options: nosniff` and the rest).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

import {
  ErrorCode,
  findUnsafeInput,
  PROBLEM_CONTENT_TYPE,
  SvcError,
  toProblem,
  ValidationError,
} from "@svc/errors";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import FindMyWay, { type HTTPMethod } from "find-my-way";
import helmet from "helmet";

/** The problem for one of Fastify's framework errors (bad URL encoding, over-long path parameter). */
function frameworkProblem(error: FastifyError): SvcError {
  if (error.code === "FST_ERR_MAX_PARAM_LENGTH") {
    return new SvcError(ErrorCode.UriTooLong, "A path segment is longer than any identifier of this API.");
  }
  if (error.code === "FST_ERR_BAD_URL") {
    return new SvcError(ErrorCode.BadRequest, "The URL is not validly %-encoded.");
  }
  return new SvcError(ErrorCode.BadRequest, "The request could not be routed.");
}

/** Node's client errors, answered on the raw socket (no request object exists yet). */
function clientErrorReply(error: NodeJS.ErrnoException & { code?: string }): SvcError {
  if (error.code === "HPE_HEADER_OVERFLOW") {
    return new SvcError(
      ErrorCode.HeadersTooLarge,
      "The request line and headers are too large (the query string counts).",
    );
  }
  if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return new SvcError(ErrorCode.RequestTimeout, "The request was not received in time.");
  }
  return new SvcError(ErrorCode.BadRequest, "The request is not valid HTTP.");
}

export interface EdgeOptions {
  readonly problemsBaseUrl: string;
}

/** How long a refused connection's remaining input is read and dropped before the socket is closed. */
const LINGER_MS = 2_000;

/** Options for the Fastify factory: framework errors and client errors as problem documents. */
export function edgeFactoryOptions(problemsBaseUrl: string) {
  return {
    // Node would refuse an HTTP/1.1 request without Host itself, with a bare 400; the onRequest hook below
    // refuses it with a problem document instead.
    http: { requireHostHeader: false },
    frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      const problem = toProblem(frameworkProblem(error), problemsBaseUrl);
      void reply
        .code(problem.status)
        .header("x-content-type-options", "nosniff")
        .type(PROBLEM_CONTENT_TYPE)
        .send(problem);
    },
    clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) => {
      if (error.code === "ECONNRESET" || socket.destroyed) return;
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      const problem = toProblem(clientErrorReply(error), problemsBaseUrl);
      const body = JSON.stringify(problem);
      // A lingering close: the answer is sent and the write side closed, while what the client is still
      // sending (the rest of a 70 KB request line) is read and dropped, for a moment. Destroying the socket
      // with unread input makes the kernel reset the connection, and the client may lose the answer.
      socket.end(
        `HTTP/1.1 ${problem.status} ${problem.title}\r\n` +
          `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
          "X-Content-Type-Options: nosniff\r\n" +
          `Content-Length: ${Buffer.byteLength(body)}\r\n` +
          "Connection: close\r\n\r\n" +
          body,
      );
      socket.on("error", () => undefined);
      socket.removeAllListeners("data");
      socket.on("data", () => undefined);
      socket.resume();
      setTimeout(() => socket.destroy(), LINGER_MS).unref();
    },
  };
}

const METHODS: HTTPMethod[] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** The headers helmet's defaults set (without `upgrade-insecure-requests`), collected once. */
export function securityHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  const collector = {
    setHeader: (name: string, value: string | number) => {
      headers[name.toLowerCase()] = String(value);
    },
    removeHeader: (name: string) => {
      delete headers[name.toLowerCase()];
    },
  };
  helmet({ contentSecurityPolicy: { directives: { upgradeInsecureRequests: null } } })(
    {} as IncomingMessage,
    collector as unknown as ServerResponse,
    // helmet throws a configuration error itself (since 8.1); it passes none to this callback.
    () => undefined,
  );
  return headers;
}

export const edgePlugin = fp<EdgeOptions>(
  async (app: FastifyInstance) => {
    // JSON API responses, later also server-rendered surfaces: helmet's defaults (nosniff, frame and
    // referrer policies, a same-origin CSP) fit both.
    // Without `upgrade-insecure-requests`: a page served over plain HTTP (development, a private network)
    // would otherwise have its own scripts and styles fetched over HTTPS, and fail.
    // helmet's headers are the same for every response (no per-request nonce), so they are worked out
    // once and added to each reply as one object: running helmet's twelve middlewares per request, each
    // setting its header on Node's response, took about a tenth of the gateway's CPU on a cached route.
    const headers = securityHeaders();
    app.addHook("onRequest", (_request, reply, done) => {
      reply.headers(headers);
      done();
    });

    // Every route is also entered here, so that a 404 can tell "no such path" from "not this method".
    const paths = FindMyWay({ ignoreTrailingSlash: false, maxParamLength: 100 });
    app.addHook("onRoute", (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        const m = method.toUpperCase() as HTTPMethod;
        if (METHODS.includes(m) && !paths.hasRoute(m, route.url)) paths.on(m, route.url, () => undefined);
      }
    });
    app.decorate("allowedMethods", (url: string): HTTPMethod[] => {
      const path = url.split("?")[0] ?? url;
      return METHODS.filter((m) => paths.find(m, path) !== null);
    });

    // Both checks run on every request: callback hooks, not async ones (a promise each).
    app.addHook("onRequest", (request, _reply, done) => {
      if (request.raw.httpVersion === "1.1" && request.headers.host === undefined) {
        done(
          new SvcError(ErrorCode.BadRequest, "An HTTP/1.1 request must have a Host header (RFC 9112, 3.2)."),
        );
        return;
      }
      done();
    });

    app.addHook("preValidation", (request, _reply, done) => {
      const finding =
        findUnsafeInput(request.params, "/params") ??
        findUnsafeInput(request.query, "/query") ??
        findUnsafeInput(request.body, "/body");
      if (finding === undefined) done();
      else done(new ValidationError([finding]));
    });
  },
  { name: "svc-edge", fastify: "5.x" },
);

declare module "fastify" {
  interface FastifyInstance {
    /** The methods a path is served with (empty when no route has the path). */
    allowedMethods(url: string): HTTPMethod[];
  }
}
