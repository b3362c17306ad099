import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/**
 * Each service owns one registry (no global default registry), so several services started in one
 * process by the test harness never clash over metric names.
 */
export function createMetricsRegistry(service: string, withDefaults = true): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (withDefaults) collectDefaultMetrics({ register: registry });
  return registry;
}

export { Counter, Gauge, Histogram, Registry };
