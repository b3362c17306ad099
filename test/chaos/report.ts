/** Plain-text tables and figures for the chaos report. */

/** Seconds with one decimal ("1.3 s"), or a dash when there is no figure. */
export function seconds(ms: number | undefined): string {
  return ms === undefined || !Number.isFinite(ms) ? "-" : `${(ms / 1000).toFixed(1)} s`;
}

/** Milliseconds below a second ("84 ms"), else seconds ("2.4 s"). */
export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "-";
  return ms < 1_000 ? `${Math.round(ms)} ms` : seconds(ms);
}

export function percentile(sorted: readonly number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Left-aligned first column, right-aligned numbers; a rule under the header. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** Counts of a service's pino log lines at error level or above, by message. */
export function errorLines(text: string): Map<string, number> {
  const byMessage = new Map<string, number>();
  for (const raw of text.split("\n")) {
    if (!raw.startsWith("{")) continue;
    try {
      const entry = JSON.parse(raw) as { level?: number; msg?: string };
      if ((entry.level ?? 0) >= 50) {
        const msg = entry.msg ?? "(no message)";
        byMessage.set(msg, (byMessage.get(msg) ?? 0) + 1);
      }
    } catch {
      // not a log line (a stack trace printed by node)
    }
  }
  return byMessage;
}
