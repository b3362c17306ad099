/**
 * For the job handlers' unit tests: what a POST to a receiver needs, with nothing outside the process but
 * a receiver on a local port. Circuits live in a bucket that holds nothing, so each stays closed (the
 * breaker's own tests cover it); the outbound policy admits 127.0.0.1 only.
 */
import type { KV } from "@nats-io/kv";
import { createLogger, Registry } from "@svc/observability";

import { CircuitBreaker } from "./circuit-breaker.js";
import type { OutboundDeps } from "./deliver.js";
import { createTargetPolicy } from "./http-client.js";
import { createWebhookMetrics } from "./metrics.js";
import type { SecretBox } from "./secrets.js";

const emptyKv = {
  get: () => Promise.resolve(null),
  create: () => Promise.resolve(1),
  update: () => Promise.resolve(1),
  put: () => Promise.resolve(1),
} as unknown as KV;

/** Outbound dependencies for a local receiver: `password` is the one sensitive field, every workspace on. */
export function localOutbound(secrets: SecretBox) {
  return {
    secrets,
    allowed: createTargetPolicy(["127.0.0.1/32"]),
    timeoutMs: 2_000,
    maxResponseBytes: 4_096,
    sensitiveFields: async () => new Set(["password"]),
    workspaces: { state: async () => "active" as const },
    pausedRetryMs: 1_000,
    wakeWaiting: async () => 0,
    breaker: new CircuitBreaker(emptyKv, 1_000, 60_000, createLogger("test", "silent")),
    metrics: createWebhookMetrics(new Registry(), () => ({ open: 0, halfOpen: 0 })),
  } satisfies OutboundDeps & Record<string, unknown>;
}
