import type { EventPublisher } from "@svc/bus";
import { type PlatformEventData, publishPlatformEvent } from "@svc/contracts";
import type { Db } from "@svc/db";
import { announceDeadLetters, type DeadLetter, deleteEndedJobs, reapExpiredLeases } from "@svc/jobs";
import { Counter, type Logger, type Registry } from "@svc/observability";
import { startHousekeeping } from "@svc/runtime";

/** Events about deliveries: a failed delivery of one of them is not announced (see below). */
const ABOUT_DELIVERIES: ReadonlySet<string> = new Set([
  "job.dead-lettered",
  "webhook.circuit-opened",
  "webhook.disabled",
]);

/**
 * The `job.dead-lettered` event of a dead letter (its job id in the event id, so a publish repeated after a
 * crash is dropped by the stream), or null when it is not announced: a failed delivery of an event that is
 * itself about deliveries stays listed as Failed in GET /api/jobs but is not announced again; otherwise
 * every failing `*` subscription would feed every other one, without end.
 */
export function deadLetterEvent(job: DeadLetter): {
  readonly eventId: string;
  readonly data: PlatformEventData["job.dead-lettered"];
} | null {
  // Only a webhook delivery's payload names a subscription and an event.
  const delivery = job.type === "webhook.deliver";
  const subscriptionId = delivery ? (job.fields.subscriptionId ?? null) : null;
  const deliveredEvent = delivery ? (job.fields.event ?? null) : null;
  if (deliveredEvent !== null && ABOUT_DELIVERIES.has(deliveredEvent)) return null;
  return {
    eventId: `job-dead-lettered-${job.id}`,
    data: {
      jobId: job.id,
      type: job.type,
      workspaceKey: job.workspaceKey,
      attempts: job.attempts,
      lastError: job.lastError?.slice(0, 500) ?? null,
      // The subscription a failed delivery was for: the dispatcher never delivers this event to it.
      ...(subscriptionId === null ? {} : { subscriptionId }),
    },
  };
}

/**
 * Announces dead letters: each Failed job not announced yet is published as `job.dead-lettered`; the job
 * library marks it announced in the transaction that holds the rows (`SKIP LOCKED`: replicas share the
 * work).
 */
function announceTo(db: Db, events: EventPublisher): Promise<number> {
  return announceDeadLetters(
    db,
    { limit: 100, payloadFields: ["subscriptionId", "event"] },
    async (deadLetters) => {
      for (const job of deadLetters) {
        const event = deadLetterEvent(job);
        if (event === null) continue;
        await publishPlatformEvent(events, "job.dead-lettered", job.workspaceKey, event.data, {
          eventId: event.eventId,
        });
      }
    },
  );
}

/**
 * Sweeps expired leases every `intervalMs`: attempts left → Pending (reclaimable at once), none
 * left → Failed. Several replicas may sweep at the same time: rows are taken with SKIP LOCKED, so each
 * expired lease is handled by exactly one sweep.
 */
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
        const announced = await announceTo(db, events);
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

/**
 * Deletes the jobs that ended more than `days` ago (succeeded, or dead letters already announced): at
 * start, then hourly. Replicas may sweep at the same time: each deletion is of rows that still qualify.
 */
export function startRetention(db: Db, days: number, log: Logger, registry: Registry) {
  const deleted = new Counter({
    name: "svc_jobs_deleted_total",
    help: "Ended jobs deleted once past their retention (BackendHost:JobRetentionDays).",
    registers: [registry],
  });
  return startHousekeeping(
    3_600_000,
    async (signal) => {
      const n = await deleteEndedJobs(db, new Date(Date.now() - days * 86_400_000), { signal });
      deleted.inc(n);
      if (n > 0) log.info({ deleted: n, days }, "deleted jobs past their retention");
    },
    log,
    "could not delete jobs past their retention",
  );
}
