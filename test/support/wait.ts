/** Polls `check` until it holds; fails with a clear message when `timeoutMs` passes first. */
export async function until(
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
  intervalMs = 25,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Probes until `ok` holds for what `probe` gave, or `timeoutMs` passed; returns the last value either way
 * (the caller's assertion then says what was wrong).
 */
export async function eventually<T>(
  probe: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 5_000,
  intervalMs = 25,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let value = await probe();
  while (!ok(value) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, intervalMs));
    value = await probe();
  }
  return value;
}

/**
 * Rate limits count in fixed windows of a wall-clock minute: a test that makes N attempts and expects the
 * (N+1)th refused must make them all in one window. Waits, when the current minute has less than
 * `needMs` left, until the next one begins.
 */
export async function inOneRateWindow(needMs = 10_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await new Promise((r) => setTimeout(r, left + 50));
}
