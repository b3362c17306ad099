import type { Bus } from "@svc/bus";
import { publishBroadcast, resolverBroadcasts } from "@svc/contracts";
import { listenForNotifications } from "@svc/db";
import type { Logger } from "@svc/observability";

/**
 * LISTENs for the resolver tables' change notifications and broadcasts `resolver.cache.invalidate`, so
 * every gateway drops cached resolutions within moments of any change, even one made with plain SQL.
 * After every (re)connection it broadcasts once, since changes made while it was away were not heard.
 */
export function startChangeListener(databaseUrl: string, bus: Bus, log: Logger): { stop(): Promise<void> } {
  const invalidate = (reason: string) =>
    publishBroadcast(bus, resolverBroadcasts["cache.invalidate"], { reason });
  return listenForNotifications({
    databaseUrl,
    channel: "svc_resolver_changed",
    applicationName: "resolver-listener",
    log,
    onNotification: (payload) => invalidate(payload || "change"),
    onConnected: () => invalidate("listener-connected"),
  });
}
