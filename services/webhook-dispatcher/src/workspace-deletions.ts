/**
 * A deleted workspace takes its webhook data with it: its subscriptions (their sealed secrets and keys
 * with them), its flows, and the delivery log and recoveries of those subscriptions. Otherwise a workspace
 * made again under the same key, by another tenant say, would reach them: its sessions would list the old
 * subscriptions and read the bodies their deliveries carried, and its events would go to the old tenant's
 * receivers. Followed from the resolver's `workspace.deleted` with a durable consumer (a deletion made
 * while the dispatcher was down is applied when it is back); only what was made before the deletion goes,
 * so what the new workspace has made since stays. Its jobs (deliveries, flow runs, recoveries) are
 * released from it: platform sessions still see them, the new workspace's do not.
 */
import { type Db, deleteInBatches, sql } from "@svc/db";
import { releaseWorkspaceJobs } from "@svc/jobs";

/** Deliveries (with their attempts) deleted per statement: a large log never holds one long transaction. */
const BATCH = 5_000;

export interface ForgottenWorkspace {
  readonly subscriptions: number;
  readonly flows: number;
  readonly deliveries: number;
  readonly jobs: number;
}

/**
 * Deletes what workspace `workspaceKey` had made before `deletedAt`. The log goes first, in batches, and
 * the subscriptions last: a dispatcher stopped half-way (the event is then delivered again) finds the same
 * subscriptions and goes on.
 */
export async function forgetWorkspace(
  db: Db,
  workspaceKey: string,
  deletedAt: Date,
): Promise<ForgottenWorkspace> {
  const subscriptions = (
    await db.any<{ id: string }>(sql`
      SELECT id::text FROM webhook_dispatcher.subscriptions
      WHERE workspace_key = ${workspaceKey} AND created_at <= ${deletedAt}`)
  ).map((r) => r.id);
  const deliveries =
    subscriptions.length === 0
      ? 0
      : await deleteInBatches(BATCH, async (limit) => {
          const { n } = await db.one<{ n: number }>(sql`
            WITH gone AS (
              DELETE FROM webhook_dispatcher.deliveries WHERE delivery_id = ANY(ARRAY(
                SELECT delivery_id FROM webhook_dispatcher.deliveries
                WHERE subscription_id = ANY(${subscriptions}::uuid[]) LIMIT ${limit}))
              RETURNING delivery_id),
            attempts AS (
              DELETE FROM webhook_dispatcher.delivery_attempts a USING gone WHERE a.delivery_id = gone.delivery_id)
            SELECT count(*)::int AS n FROM gone`);
          return n;
        });
  return db.unitOfWork(async (tx) => {
    await tx.query(sql`
      DELETE FROM webhook_dispatcher.recoveries WHERE subscription_id = ANY(${subscriptions}::uuid[])`);
    const subs = await tx.query(sql`
      DELETE FROM webhook_dispatcher.subscriptions WHERE id = ANY(${subscriptions}::uuid[])`);
    const flows = await tx.query(sql`
      DELETE FROM webhook_dispatcher.flows
      WHERE workspace_key = ${workspaceKey} AND created_at <= ${deletedAt}`);
    const jobs = await releaseWorkspaceJobs(tx, workspaceKey, deletedAt);
    return { subscriptions: subs.rowCount ?? 0, flows: flows.rowCount ?? 0, deliveries, jobs };
  });
}
