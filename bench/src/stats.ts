/** The p-th percentile of ascending `values` (NaN when there are none). */
export function percentile(values: readonly number[], p: number): number {
  return values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))] ?? Number.NaN;
}

/** A sorted copy, ascending. */
export const sorted = (values: readonly number[]) => [...values].sort((a, b) => a - b);

/** "<ratio>x alone (target <= 2x: met|NOT met)": a figure against its value without a flood. */
export function againstAlone(p95: number, alone: number): string {
  const ratio = p95 / alone;
  return `${ratio.toFixed(2)}x alone (target <= 2x: ${ratio <= 2 ? "met" : "NOT met"})`;
}
