import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/**
 * prom-client's default gauges whose names end in `_total`, a suffix Prometheus reserves for counters
 * (`promtool check metrics` refuses them). Each only sums a gauge that prom-client exposes beside it by
 * type (`nodejs_active_handles{type=…}` and so on), so they are dropped: `sum(nodejs_active_handles)` is
 * the same number.
 */
const MISNAMED_GAUGES = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
] as const;

/**
 * Each service owns one registry (no global default registry), so several services started in one
 * process by the test harness never clash over metric names.
 */
export function createMetricsRegistry(service: string, withDefaults = true): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (withDefaults) {
    collectDefaultMetrics({ register: registry });
    for (const name of MISNAMED_GAUGES) registry.removeSingleMetric(name);
  }
  return registry;
}

export { Counter, Gauge, Histogram, Registry };
