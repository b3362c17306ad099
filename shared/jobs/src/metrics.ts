import { Counter, Gauge, Histogram, type Registry } from "@svc/observability";

/** What a worker reports of its claimed jobs held back by a per-workspace limit: (type, count) pairs. */
export type HeldJobs = () => Iterable<readonly [type: string, held: number]>;

/** The job engine's metrics; queue depth is a gauge collected by the job-reaper service. */
export interface JobMetrics {
  readonly attempts: Counter<"type" | "outcome">;
  readonly claimLatency: Histogram<"type">;
  readonly staleWritebacks: Counter<"type">;
  /** Reports a worker's held jobs in `svc_jobs_held` at each scrape; returns the call that stops it. */
  watchHeld(source: HeldJobs): () => void;
}

export function createJobMetrics(registry: Registry): JobMetrics {
  const heldSources = new Set<HeldJobs>();
  new Gauge({
    name: "svc_jobs_held",
    help: "Jobs this replica claimed that wait for their workspace's JobWorkspaceConcurrency or JobWorkspaceRatePerSecond, by type.",
    labelNames: ["type"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const source of heldSources) for (const [type, held] of source()) this.labels(type).inc(held);
    },
  });
  return {
    attempts: new Counter({
      name: "svc_jobs_attempts_total",
      help: "Job attempts by type and outcome (succeeded, retried, dead, stale, deferred).",
      labelNames: ["type", "outcome"] as const,
      registers: [registry],
    }),
    claimLatency: new Histogram({
      name: "svc_jobs_claim_latency_seconds",
      help: "Time from when a job was due to when a worker started it.",
      labelNames: ["type"] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    staleWritebacks: new Counter({
      name: "svc_jobs_stale_writebacks_total",
      help: "Completions, failures or lease renewals refused because another claim holds the job.",
      labelNames: ["type"] as const,
      registers: [registry],
    }),
    watchHeld(source) {
      heldSources.add(source);
      return () => void heldSources.delete(source);
    },
  };
}
