/**
 * What the chaos runs count jobs with, in the run's own database: a trigger that records every status
 * change of a job and every write of a final state (the engine writes Succeeded or Failed only from
 * Running, so a job with two such writes completed twice), and the counts read from it.
 */
import type pg from "pg";

export async function instrumentJobWrites(db: pg.Client): Promise<void> {
  await db.query(`
    CREATE SCHEMA chaos;
    CREATE TABLE chaos.job_writes (
      job_id bigint NOT NULL, old_status text NOT NULL, new_status text NOT NULL, reason text,
      at timestamptz NOT NULL DEFAULT clock_timestamp());
    CREATE FUNCTION chaos.record_job_write() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO chaos.job_writes (job_id, old_status, new_status, reason)
      VALUES (OLD.id, OLD.status, NEW.status, left(NEW.last_error, 200));
      RETURN NULL;
    END $$;
    CREATE TRIGGER chaos_job_writes AFTER UPDATE ON job_reaper.jobs
      FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR NEW.status IN ('Succeeded', 'Failed'))
      EXECUTE FUNCTION chaos.record_job_write();`);
}

/** The events whose webhook delivery (or, with `flow.run`, flow run) ended as a dead letter (a Failed job). */
export async function deadLetterEventIds(
  client: pg.Client,
  type: "webhook.deliver" | "flow.run" = "webhook.deliver",
): Promise<Set<string>> {
  const { rows } = await client.query<{ event_id: string }>(
    `SELECT payload->>'eventId' AS event_id FROM job_reaper.jobs WHERE type = $1 AND status = 'Failed'`,
    [type],
  );
  return new Set(rows.map((r) => r.event_id));
}

/**
 * Duplicate completions: more than one job for one (event, subscription) or one (event, flow) (the
 * matcher's idempotency keys are meant to make that impossible), and jobs that reached a final state more
 * than once (a dead letter announced later is written again as Failed: that is no second completion).
 */
export async function countDuplicateCompletions(
  client: pg.Client,
): Promise<{ extraJobs: number; doubleFinal: number }> {
  const count = async (text: string) => (await client.query<{ n: number }>(text)).rows[0]?.n ?? 0;
  return {
    extraJobs: await count(
      `SELECT coalesce(sum(n - 1), 0)::int AS n FROM (
         SELECT count(*) AS n FROM job_reaper.jobs WHERE type IN ('webhook.deliver', 'flow.run')
         GROUP BY type, payload->>'eventId', payload->>'subscriptionId', payload->>'flowId'
         HAVING count(*) > 1) d`,
    ),
    doubleFinal: await count(
      `SELECT count(*)::int AS n FROM (
         SELECT job_id FROM chaos.job_writes
         WHERE new_status IN ('Succeeded', 'Failed') AND old_status <> new_status
         GROUP BY job_id HAVING count(*) > 1) d`,
    ),
  };
}
