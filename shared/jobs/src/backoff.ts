/** Exponential backoff, base 30 seconds, doubling per attempt. */
export const BACKOFF_BASE_MS = 30_000;
/** Spread of the jitter around the nominal delay: ±10 %, so retries of many jobs do not arrive together. */
export const BACKOFF_JITTER = 0.1;
/** No retry waits longer than a day, however many attempts a type allows. */
export const BACKOFF_MAX_MS = 24 * 3_600_000;

/**
 * Delay before the retry that follows failed attempt number `attempt` (1-based): 30 s, 60 s, 120 s, …,
 * each ±10 %. `random` is injectable for tests. A receiver's Retry-After, when longer, wins, within the
 * same one-day cap.
 */
export function retryDelayMs(
  attempt: number,
  random: () => number = Math.random,
  retryAfterMs?: number,
): number {
  const nominal = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1));
  const jittered = Math.round(nominal * (1 - BACKOFF_JITTER + 2 * BACKOFF_JITTER * random()));
  return Math.min(BACKOFF_MAX_MS, Math.max(jittered, retryAfterMs ?? 0));
}
