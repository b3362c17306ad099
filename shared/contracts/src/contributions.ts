/**
 * Following what installed plugins contribute: a service that holds a part of it
 * (rbac: permission keys; the webhook dispatcher: sensitive fields and event names) applies the whole
 * current set at start, within a second of every change (the registry's broadcast), after a NATS
 * reconnect and every 30 s (a broadcast missed during a blip is repaired then). Applying is idempotent.
 */
import { type Bus, coalesce } from "@svc/bus";

import { messageClient, onBroadcast } from "./messages.js";
import {
  type PluginContribution,
  pluginRegistryBroadcasts,
  pluginRegistryMessages,
} from "./plugin-registry.js";

export interface ContributionFollower {
  /** Fetches and applies the current set now (resolves when applied, or rejects). */
  sync(): Promise<void>;
  stop(): void;
}

export function followContributions(
  bus: Bus,
  /** `requestedAt`: when the registry was asked for this list (epoch ms). */
  apply: (plugins: readonly PluginContribution[], requestedAt: number) => Promise<void>,
  onError: (error: unknown) => void,
  intervalMs = 30_000,
): ContributionFollower {
  const registry = messageClient(bus, pluginRegistryMessages);
  const sync = coalesce(async () => {
    const requestedAt = Date.now();
    const { plugins } = await registry.request("contributions.list", {});
    await apply(plugins, requestedAt);
  });
  const quiet = () => void sync().catch(onError);
  onBroadcast(bus, pluginRegistryBroadcasts["contributions.changed"], quiet);
  const timer = setInterval(quiet, intervalMs);
  timer.unref();
  quiet();
  return { sync, stop: () => clearInterval(timer) };
}

/** An error handler that stays quiet while the plugin registry is not running yet (503). */
export function quietUnlessUp(log: { warn: (obj: object, msg: string) => void }) {
  return (error: unknown) => {
    if ((error as { status?: number }).status === 503) return;
    log.warn({ err: error }, "could not apply the installed plugins' contributions");
  };
}
