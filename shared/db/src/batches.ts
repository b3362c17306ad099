import sql, { raw } from "sql-template-tag";

import type { Queries } from "./pool.js";

/** How a sweep of old rows goes: rows per statement, and a signal that ends it after the batch in hand. */
export interface SweepOptions {
  readonly signal?: AbortSignal;
  readonly batch?: number;
}

/**
 * Runs `deleteSome(limit)` until one run deletes fewer than `limit` rows, or `signal` is aborted (its
 * service stops: the rest waits for the next sweep): each run its own statement, so a large deletion never
 * holds one long transaction. Returns how many it deleted in all.
 */
export async function deleteInBatches(
  limit: number,
  deleteSome: (limit: number) => Promise<number>,
  signal?: AbortSignal,
): Promise<number> {
  let deleted = 0;
  for (;;) {
    const n = await deleteSome(limit);
    deleted += n;
    if (n < limit || signal?.aborted) return deleted;
  }
}

/**
 * Deletes the rows of `table` (its key `id`) whose timestamp `column` is more than `days` old, `batch` at a
 * time (`deleteInBatches`, stopping after the batch in hand once `signal` is aborted). `table` and
 * `column` are the caller's constants, never input. Returns how many it deleted.
 */
export function deleteOlderThan(
  db: Queries,
  table: string,
  column: string,
  days: number,
  { signal, batch = 5_000 }: SweepOptions = {},
): Promise<number> {
  return deleteInBatches(
    batch,
    async (limit) =>
      (
        await db.query(sql`
          DELETE FROM ${raw(table)} WHERE id = ANY(ARRAY(
            SELECT id FROM ${raw(table)} WHERE ${raw(column)} < now() - make_interval(days => ${days}) LIMIT ${limit}))`)
      ).rowCount ?? 0,
    signal,
  );
}
