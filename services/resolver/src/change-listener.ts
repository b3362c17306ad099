import type { Bus } from "@svc/bus";
import type { Logger } from "@svc/observability";
import pg from "pg";

const CHANNEL = "svc_resolver_changed";

/**
 * LISTENs for the resolver tables' change notifications and broadcasts `resolver.cache.invalidate`, so
 * every gateway drops cached resolutions within moments of any change, even one made with plain SQL.
 * Reconnects with a delay when the connection drops; after a reconnect it broadcasts once, since changes
 * made while it was away were not heard.
 */
export function startChangeListener(databaseUrl: string, bus: Bus, log: Logger): { stop(): Promise<void> } {
  let client: pg.Client | undefined;
  let stopped = false;
  let retryTimer: NodeJS.Timeout | undefined;

  const connect = async () => {
    if (stopped) return;
    const c = new pg.Client({ connectionString: databaseUrl, application_name: "resolver-listener" });
    c.on("error", (err) => {
      log.warn({ error: err.message }, "resolver change listener lost its connection");
      schedule();
    });
    c.on("notification", (n) =>
      bus.broadcast("resolver.cache.invalidate", { reason: n.payload ?? "change" }),
    );
    try {
      await c.connect();
      await c.query(`LISTEN ${CHANNEL}`);
      if (stopped) {
        await c.end();
        return;
      }
      client = c;
      bus.broadcast("resolver.cache.invalidate", { reason: "listener-connected" });
    } catch (err) {
      log.warn({ error: (err as Error).message }, "resolver change listener could not connect");
      await c.end().catch(() => undefined);
      schedule();
    }
  };

  const schedule = () => {
    const previous = client;
    client = undefined;
    void previous?.end().catch(() => undefined);
    if (stopped || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, 1_000);
  };

  void connect();
  return {
    async stop() {
      stopped = true;
      clearTimeout(retryTimer);
      await client?.end().catch(() => undefined);
      client = undefined;
    },
  };
}
