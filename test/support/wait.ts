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
