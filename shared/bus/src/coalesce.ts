/**
 * Runs `task` one at a time: a call while it runs does not start a second run but asks for one more
 * afterwards (calls meanwhile are folded into it), and resolves when that one is done. For work that
 * applies "the current state" (a resync, a reconcile), where running twice at once is waste and a change
 * seen mid-run must not be missed.
 */
export function coalesce(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let again = false;
  return () => {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await task();
      } while (again);
    })().finally(() => {
      running = undefined;
    });
    return running;
  };
}
