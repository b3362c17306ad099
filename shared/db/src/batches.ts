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
