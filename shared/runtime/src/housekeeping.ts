import type { Logger } from "@svc/observability";

/**
 * Runs `work` at once and then every `everyMs`, one run at a time (a run still going when the next is due
 * is not doubled), logging a failure as `failure` and trying again at the next turn. `stop` ends the turns
 * and waits for a run in progress.
 */
export function startHousekeeping(
  everyMs: number,
  work: () => Promise<void>,
  log: Logger,
  failure: string,
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const turn = () => {
    running ??= work()
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
      await running;
    },
  };
}
