import type { Logger } from "@svc/observability";
import pg from "pg";

export interface ListenOptions {
  readonly databaseUrl: string;
  /** A fixed identifier (it is interpolated into `LISTEN`). */
  readonly channel: string;
  readonly applicationName: string;
  readonly log: Logger;
  readonly onNotification: (payload: string) => void;
  /** Called after every (re)connection: notifications sent while away were not heard. */
  readonly onConnected?: () => void;
  /** Called when the connection is lost or a connection attempt fails: notifications go unheard until the next `onConnected`. */
  readonly onDisconnected?: () => void;
}

export interface Listener {
  /** Settles after the first connection attempt, whether it succeeded or not. */
  readonly ready: Promise<void>;
  stop(): Promise<void>;
}

/**
 * A dedicated connection that LISTENs on one channel, reconnecting a second after the connection fails
 * or drops. Callers keep a slower fallback (a poll, a TTL) for the time it is away.
 */
export function listenForNotifications(options: ListenOptions): Listener {
  if (!/^[a-z_][a-z0-9_]*$/.test(options.channel)) throw new Error(`invalid channel ${options.channel}`);
  let client: pg.Client | undefined;
  let stopped = false;
  let retryTimer: NodeJS.Timeout | undefined;

  const schedule = () => {
    const previous = client;
    client = undefined;
    options.onDisconnected?.();
    void previous?.end().catch(() => undefined);
    if (stopped || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, 1_000);
    retryTimer.unref();
  };

  const connect = async () => {
    if (stopped) return;
    const c = new pg.Client({
      connectionString: options.databaseUrl,
      application_name: options.applicationName,
    });
    c.on("error", (err) => {
      options.log.warn({ error: err.message, channel: options.channel }, "listener lost its connection");
      schedule();
    });
    c.on("notification", (n) => options.onNotification(n.payload ?? ""));
    try {
      await c.connect();
      await c.query(`LISTEN ${options.channel}`);
      if (stopped) {
        await c.end().catch(() => undefined);
        return;
      }
      client = c;
      options.onConnected?.();
    } catch (err) {
      options.log.warn(
        { error: (err as Error).message, channel: options.channel },
        "listener could not connect",
      );
      await c.end().catch(() => undefined);
      schedule();
    }
  };

  const ready = connect();
  return {
    ready,
    async stop() {
      stopped = true;
      clearTimeout(retryTimer);
      await ready;
      await client?.end().catch(() => undefined);
      client = undefined;
    },
  };
}
