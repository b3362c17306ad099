/**
 * What keeps idle or slow connections from taking the gateway down: 20,000 sockets that
 * never sent a byte once used up the process's file descriptors, and `/health` stopped answering.
 *
 * - Time limits on every connection (`connectionTimeouts`, given to Node's HTTP server): the request's
 *   headers must arrive within `headersTimeoutMs` of the connection (or of the previous response), the
 *   whole request within `requestTimeoutMs`, and a socket with no traffic at all is closed after
 *   `idleTimeoutMs`. Node checks the first two every second here (its default is every 30 s).
 * - A connection must send its first request within the headers timeout too (`guardConnections`).
 * - A cap per client address (`guardConnections`): past `maxPerClient` open connections from one
 *   address, a new one is closed at once. The trusted proxies are exempt, since every client behind them
 *   shares their address (the proxy applies its own limits).
 */
import type { Server, Socket } from "node:net";

import { isTrustedProxy, normaliseAddress, type ProxyList } from "./auth/rate-limiter.js";

export interface ConnectionTimeouts {
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly idleTimeoutMs: number;
}

/** Fastify factory options: Node's own timeouts, checked every second. */
export function connectionTimeouts(limits: ConnectionTimeouts) {
  return {
    connectionTimeout: limits.idleTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      connectionsCheckingInterval: 1_000,
    },
  };
}

/**
 * Closes a client's connections past `maxPerClient` as they open (0: no cap), and any connection whose
 * first request has not arrived within `firstRequestMs` (Node's headers timeout applies only once a request
 * has begun: a socket that never sends a byte would otherwise stay until the idle timeout).
 */
export function guardConnections(
  server: Server,
  options: {
    readonly maxPerClient: number;
    readonly firstRequestMs: number;
    readonly trusted: ProxyList;
    readonly onRefused?: () => void;
  },
): void {
  const open = new Map<string, number>();
  const waiting = new WeakMap<Socket, NodeJS.Timeout>();
  server.on("request", (request: { socket: Socket }) => {
    const timer = waiting.get(request.socket);
    if (timer !== undefined) {
      clearTimeout(timer);
      waiting.delete(request.socket);
    }
  });
  server.on("connection", (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), options.firstRequestMs);
    timer.unref();
    waiting.set(socket, timer);
    socket.once("close", () => clearTimeout(timer));
    const address = normaliseAddress(socket.remoteAddress ?? "");
    if (options.maxPerClient === 0 || address === null || isTrustedProxy(address, options.trusted)) return;
    const key = address.toString();
    const count = open.get(key) ?? 0;
    if (count >= options.maxPerClient) {
      options.onRefused?.();
      socket.destroy();
      return;
    }
    open.set(key, count + 1);
    socket.once("close", () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    });
  });
}
