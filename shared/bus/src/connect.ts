import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "@svc/observability";

export interface ConnectOptions {
  readonly url: string;
  /** Connection name shown by the NATS server's monitoring (`<service>@<host>`). */
  readonly name: string;
  readonly logger: Logger;
}

/** Whether each connection is up, as its status events last said (a request sent while down would wait). */
const connected = new WeakMap<NatsConnection, boolean>();

/**
 * Follows a connection's disconnects and reconnects, so that callers can fail fast while it is down
 * instead of waiting for a buffered request to time out. Idempotent.
 */
export function trackConnection(nc: NatsConnection): void {
  if (connected.has(nc)) return;
  connected.set(nc, !nc.isClosed());
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") connected.set(nc, false);
      else if (status.type === "reconnect") connected.set(nc, true);
    }
  })().catch(() => undefined);
}

/** False while the connection is down (between a disconnect and the reconnect) or closed. */
export function isNatsConnected(nc: NatsConnection): boolean {
  return !nc.isClosed() && (connected.get(nc) ?? true);
}

/**
 * Connects to NATS and keeps reconnecting for ever: a service outlives a NATS restart, and /ready tells
 * the orchestrator while it is cut off.
 */
export async function connectNats(options: ConnectOptions): Promise<NatsConnection> {
  const nc = await connect({
    servers: options.url.split(",").map((s) => s.trim()),
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: false,
    timeout: 5_000,
  });
  trackConnection(nc);
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect" || status.type === "reconnect" || status.type === "error") {
        options.logger.warn({ nats: status.type }, "nats connection status changed");
      }
    }
  })().catch(() => undefined);
  return nc;
}

/** True when a round trip to the NATS server completes within the timeout. */
export async function natsIsReachable(nc: NatsConnection, timeoutMs: number): Promise<boolean> {
  if (nc.isClosed()) return false;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      nc.rtt().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
