import type { Logger } from "@svc/observability";

/**
 * Runs `work` at once and then every `everyMs`, one run at a time (a run still going when the next is due
 * is not doubled), logging a failure as `failure` and trying again at the next turn. `stop` ends the turns,
 * aborts `signal` (work done in batches stops after the batch in hand: a first sweep of a large table
 * never holds a service's stop past its shutdown timeout; the next start goes on from there) and waits for
 * the run in progress.
 */
export function startHousekeeping(
  everyMs: number,
  work: (signal: AbortSignal) => Promise<void>,
  log: Logger,
  failure: string,
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const stopping = new AbortController();
  const turn = () => {
    running ??= work(stopping.signal)
      .catch((err: unknown) => log.warn({ error: (err as Error).message }, failure))
      .finally(() => {
        running = undefined;
      });
  };
  turn();
  const timer = setInterval(turn, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      stopping.abort();
      await running;
    },
  };
}
