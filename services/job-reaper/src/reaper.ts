import type { EventPublisher } from "@svc/bus";
import { type Db, sql } from "@svc/db";
import { reapExpiredLeases } from "@svc/jobs";
import { Counter, type Logger, type Registry } from "@svc/observability";

/**
 * Sweeps expired leases every `intervalMs`: attempts left → Pending (reclaimable at once), none
 * left → Failed. Several replicas may sweep at the same time: rows are taken with SKIP LOCKED, so each
 * expired lease is handled by exactly one sweep.
 */
/**
 * Announces dead letters: each Failed job not announced yet is published as `job.dead-lettered` (its id as
 * the event id, so a publish repeated after a crash is dropped by the stream) and then marked announced,
 * in one transaction that holds the rows (`SKIP LOCKED`: replicas share the work).
 */
/** Events about deliveries: a failed delivery of one of them is not announced (see below). */
const ABOUT_DELIVERIES: ReadonlySet<string> = new Set(["job.dead-lettered", "webhook.circuit-opened"]);

async function announceDeadLetters(db: Db, events: EventPublisher): Promise<number> {
  return db.transaction(async (tx) => {
    const rows = await tx.any<{
      id: string;
      type: string;
      workspace_key: string | null;
      attempts: number;
      last_error: string | null;
      subscription_id: string | null;
      delivered_event: string | null;
    }>(sql`
      SELECT id::text AS id, type, workspace_key, attempts, last_error,
             CASE WHEN type = 'webhook.deliver' THEN payload->>'subscriptionId' END AS subscription_id,
             CASE WHEN type = 'webhook.deliver' THEN payload->>'event' END AS delivered_event
      FROM job_reaper.jobs
      WHERE status = 'Failed' AND announced_at IS NULL
      ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`);
    for (const r of rows) {
      // No delivery loop: a failed delivery of an event that is itself about
      // deliveries is not announced again (it stays listed as Failed in GET /api/jobs); otherwise every
      // failing `*` subscription would feed every other one, without end.
      if (r.delivered_event !== null && ABOUT_DELIVERIES.has(r.delivered_event)) continue;
      await events.publish(
        "job.dead-lettered",
        r.workspace_key,
        {
          jobId: r.id,
          type: r.type,
          workspaceKey: r.workspace_key,
          attempts: r.attempts,
          lastError: r.last_error?.slice(0, 500) ?? null,
          // The subscription a failed delivery was for: the dispatcher never delivers this event to it.
          ...(r.subscription_id === null ? {} : { subscriptionId: r.subscription_id }),
        },
        { eventId: `job-dead-lettered-${r.id}` },
      );
    }
    if (rows.length > 0) {
      await tx.query(
        sql`UPDATE job_reaper.jobs SET announced_at = now() WHERE id = ANY(${rows.map((r) => r.id)}::bigint[])`,
      );
    }
    return rows.length;
  });
}

export function startReaper(
  db: Db,
  intervalMs: number,
  log: Logger,
  registry: Registry,
  events?: EventPublisher,
) {
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
    if (events !== undefined && !stopped) {
      try {
        const announced = await announceDeadLetters(db, events);
        if (announced > 0) log.info({ announced }, "dead-lettered jobs announced");
      } catch (err) {
        log.warn({ error: (err as Error).message }, "announcing dead letters failed; tried again next sweep");
      }
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
