/**
 * A plugin process's report of a route handler's run, recorded by the host as a span of the caller's
 * trace (the process has no OpenTelemetry of its own). The report comes from where the plugin's code runs,
 * so nothing in it is trusted: a `traceparent` that is not well-formed records nothing, the times are
 * bounded by the host's clock (ended no later than now, a minute long at most), and the names are cut.
 */
import { failed, SpanKind, startSpan, storedContext } from "@svc/observability";

export interface ProcessSpanReport {
  readonly traceparent: unknown;
  readonly handler: unknown;
  readonly started: unknown;
  readonly ended: unknown;
  readonly outcome: unknown;
}

/** A `traceparent` the process sent, when it is well-formed (version 00). */
export const traceparentOnly = (value: unknown): string | null =>
  typeof value === "string" && /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/.test(value) ? value : null;

const MAX_SPAN_MS = 60_000;
const OUTCOMES = new Set(["ok", "failed", "timeout"]);

/** Records the report as a span of the plugin's scope; returns whether one was recorded. */
export function recordProcessSpan(
  plugin: { readonly pluginId: string; readonly version: string },
  report: ProcessSpanReport,
  now = Date.now(),
): boolean {
  const parent = storedContext(traceparentOnly(report.traceparent));
  if (parent === undefined || typeof report.started !== "number" || typeof report.ended !== "number")
    return false;
  if (!Number.isFinite(report.started) || !Number.isFinite(report.ended)) return false;
  const ended = Math.min(now, report.ended);
  const started = Math.max(ended - MAX_SPAN_MS, Math.min(report.started, ended));
  const handler = String(report.handler).slice(0, 100);
  const outcome = OUTCOMES.has(report.outcome as string) ? (report.outcome as string) : "failed";
  const span = startSpan(`plugin:${plugin.pluginId}`, `plugin ${plugin.pluginId} ${handler}`, {
    kind: SpanKind.SERVER,
    parent,
    startTime: started,
    attributes: {
      "svc.plugin.id": plugin.pluginId,
      "svc.plugin.version": plugin.version,
      "svc.plugin.handler": handler,
      "svc.plugin.outcome": outcome,
    },
  });
  if (span === undefined) return false;
  if (outcome !== "ok") failed(span, new Error(`the handler ${outcome}`));
  span.end(ended);
  return true;
}
