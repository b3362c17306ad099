/**
 * The dispatcher's webhook metrics, beside the job engine's (`svc_jobs_*{type="webhook.deliver"}`):
 * - `svc_webhook_deliveries_total{outcome}`: each delivery attempt's end: `delivered` (a 2xx), `failed`
 *   (another status, a connection failure or a time-out; retried by the job engine), `deferred` (the
 *   receiver's circuit is open: no request was sent), `refused` (the target is not allowed: failed for
 *   good), `skipped` (the subscription was disabled or deleted meanwhile), `error` (the platform could not
 *   prepare it: the database, a secret that no longer decrypts; retried by the job engine).
 * - `svc_webhook_delivery_duration_seconds{outcome}`: the time of an attempt's HTTP exchange, its two
 *   in-attempt retries included (`delivered` or `failed`).
 * - `svc_flow_events_over_budget_total`: events flows would have published past the budget of the chain
 *   one event started (`BackendHost__FlowEventBudget`), dropped instead.
 * - `svc_webhook_events_dropped_total{reason}`: events dropped before matching: `source` (the name does not
 *   belong to who published it: a plugin's undeclared event or one into a workspace whose chain lacks it, a
 *   core event from a flow) or `malformed` (not JSON, unsafe text, an over-long id).
 * - `svc_webhook_circuits{state}`: receivers whose circuit is `open` (deliveries wait) or `half_open`
 *   (the next delivery is a trial), read from the state every replica shares: each replica reports the
 *   same number, so dashboards and alerts take `max`.
 * - `svc_webhook_subscription_changes_heard_total`: subscription changes PostgreSQL announced to this
 *   replica (its trigger, for changes through the API and plain SQL alike); each drops the replica's copy.
 */
import { Counter, Gauge, Histogram, type Registry } from "@svc/observability";

const DELIVERY_OUTCOMES = ["delivered", "failed", "deferred", "refused", "skipped", "error"] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];
const DROP_REASONS = ["source", "malformed"] as const;
export type DropReason = (typeof DROP_REASONS)[number];

export interface WebhookMetrics {
  readonly deliveries: Counter<"outcome">;
  readonly duration: Histogram<"outcome">;
  readonly flowEventsOverBudget: Counter;
  readonly eventsDropped: Counter<"reason">;
  readonly subscriptionChanges: Counter;
}

export function createWebhookMetrics(
  registry: Registry,
  circuits: () => { open: number; halfOpen: number },
): WebhookMetrics {
  const deliveries = new Counter({
    name: "svc_webhook_deliveries_total",
    help: "Webhook delivery attempts by outcome (delivered, failed, deferred, refused, skipped, error).",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  // Every outcome is a series from the start, so rates are defined before the first failure.
  for (const outcome of DELIVERY_OUTCOMES) deliveries.labels(outcome).inc(0);
  const duration = new Histogram({
    name: "svc_webhook_delivery_duration_seconds",
    help: "Time of a webhook delivery attempt's HTTP exchange (retries within the attempt included).",
    labelNames: ["outcome"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  new Gauge({
    name: "svc_webhook_circuits",
    help: "Receivers by circuit state (open, half_open), from the state all replicas share.",
    labelNames: ["state"] as const,
    registers: [registry],
    // The gateway's aggregate /metrics merges replicas: they all report the same shared state.
    aggregator: "max",
    collect() {
      const { open, halfOpen } = circuits();
      this.labels("open").set(open);
      this.labels("half_open").set(halfOpen);
    },
  });
  const flowEventsOverBudget = new Counter({
    name: "svc_flow_events_over_budget_total",
    help: "Events flows would have published past the budget of the chain one event started, dropped.",
    registers: [registry],
  });
  const eventsDropped = new Counter({
    name: "svc_webhook_events_dropped_total",
    help: "Events dropped before matching: reason source (its name does not belong to who published it) or malformed.",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  for (const reason of DROP_REASONS) eventsDropped.labels(reason).inc(0);
  const subscriptionChanges = new Counter({
    name: "svc_webhook_subscription_changes_heard_total",
    help: "Subscription changes PostgreSQL announced to this replica; each drops its copy of that subscription.",
    registers: [registry],
  });
  return { deliveries, duration, flowEventsOverBudget, eventsDropped, subscriptionChanges };
}
