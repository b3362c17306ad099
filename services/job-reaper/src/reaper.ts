import type { Db } from "@svc/db";
import { reapExpiredLeases } from "@svc/jobs";
import { Counter, type Logger, type Registry } from "@svc/observability";

/**
 * Sweeps expired leases every `intervalMs` (spec 3.1): attempts left → Pending (reclaimable at once), none
 * left → Failed. Several replicas may sweep at the same time: rows are taken with SKIP LOCKED, so each
 * expired lease is handled by exactly one sweep.
 */
export function startReaper(db: Db, intervalMs: number, log: Logger, registry: Registry) {
  const reaped = new Counter({
    name: "svc_jobs_reaped_leases_total",
    help: "Expired job leases handled by the reaper, by outcome (released, failed).",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  const sweep = async () => {
    try {
      // Drain a backlog in chunks, then wait for the next interval.
      for (;;) {
        const result = await reapExpiredLeases(db);
        if (result.released > 0) reaped.inc({ outcome: "released" }, result.released);
        if (result.failed > 0) reaped.inc({ outcome: "failed" }, result.failed);
        if (result.released + result.failed > 0) log.info(result, "reaped expired job leases");
        if (result.released + result.failed < 1_000 || stopped) break;
      }
    } catch (err) {
      log.warn({ error: (err as Error).message }, "reaper sweep failed");
    }
  };

  const loop = () => {
    if (stopped) return;
    running = sweep().finally(() => {
      running = undefined;
      if (!stopped) timer = setTimeout(loop, intervalMs);
    });
  };
  timer = setTimeout(loop, intervalMs);

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
