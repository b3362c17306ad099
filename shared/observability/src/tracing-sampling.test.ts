/**
 * Sampling at a server's edge: an unsampled request gets no OpenTelemetry span or context of its own (a
 * cheap context holding its ids), yet answers, passes on, stores and logs the same trace context the SDK
 * would; a sampled one gets the SDK's span of the very trace id the sampler said yes to.
 */
import { createContextKey, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  SamplingDecision,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace";
import { afterEach, describe, expect, it } from "vitest";

import {
  currentIds,
  currentTraceContext,
  extractContext,
  injectContext,
  injectSpan,
  inSpan,
  startServerTrace,
  startSpan,
  startTracing,
  stopTracing,
  storedContext,
  withContext,
  withSpan,
} from "./tracing.js";

const identity = { service: "test", version: "0", instance: "i" };
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0([01])$/;
const T = "4bf92f3577b34da6a3ce929d0e0e4736";
const S = "00f067aa0ba902b7";

let exporter: InMemorySpanExporter;
async function start(env: Record<string, string>) {
  exporter = new InMemorySpanExporter();
  await startTracing(identity, env, [new SimpleSpanProcessor({ exporter })]);
}
const injected = (write: (w: (name: string, value: string) => void) => void) => {
  const headers: Record<string, string> = {};
  write((name, value) => (headers[name] = value));
  return headers;
};
const name = () => "GET /thing";

afterEach(async () => {
  await stopTracing();
});

describe("an unsampled request (parent-based sampler, ratio 0)", () => {
  it("answers, passes on, stores and logs its own ids, across awaits, and exports nothing", async () => {
    await start({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" });
    const started = startServerTrace("test", undefined, undefined, name);
    expect(started?.span).toBeUndefined();
    const [, traceId, spanId, sampled] = TRACEPARENT.exec(started?.traceparent ?? "") ?? [];
    expect(sampled).toBe("0");
    await withContext(started?.context, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      expect(currentIds()).toEqual({ trace_id: traceId, span_id: spanId });
      expect(currentTraceContext()).toBe(started?.traceparent);
      expect(injected((w) => injectContext(w))).toEqual({ traceparent: started?.traceparent });
      // A span under it (a NATS request, a statement) is the trace's own, not recorded: same ids.
      const child = startSpan("test", "child");
      expect(child?.isRecording()).toBe(false);
      expect(child?.spanContext()).toMatchObject({ traceId, spanId, traceFlags: 0 });
      expect(injected((w) => injectSpan(w, child as never))).toEqual({ traceparent: started?.traceparent });
      await withSpan(child, async () => {
        await Promise.resolve();
        expect(currentTraceContext()).toBe(started?.traceparent);
      });
      await inSpan("test", "work", {}, async (span) => {
        expect(span?.isRecording()).toBe(false);
        expect(currentIds()).toEqual({ trace_id: traceId, span_id: spanId });
      });
    });
    // Outside it, nothing.
    expect(currentIds()).toBeUndefined();
    expect(currentTraceContext()).toBeNull();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it("continues a caller's unsampled trace with a span id of its own; a stored one runs as it was", async () => {
    await start({ OTEL_TRACES_SAMPLER: "parentbased_always_on" });
    const started = startServerTrace("test", `00-${T}-${S}-00`, undefined, name);
    expect(started?.span).toBeUndefined();
    const [, traceId, spanId, sampled] = TRACEPARENT.exec(started?.traceparent ?? "") ?? [];
    expect([traceId, sampled]).toEqual([T, "0"]);
    expect(spanId).not.toBe(S);
    // A stored context (an outbox row, a job) and a NATS header continue the trace as passed on.
    const stored = storedContext(`00-${T}-${S}-00`);
    expect(withContext(stored, () => currentTraceContext())).toBe(`00-${T}-${S}-00`);
    const extracted = extractContext({ get: (n) => (n === "traceparent" ? `00-${T}-${S}-00` : undefined) });
    expect(withContext(extracted, () => currentIds())).toEqual({ trace_id: T, span_id: S });
    // The real context it stands for, when an OpenTelemetry API reads it: the same span context.
    const { trace } = await import("@opentelemetry/api");
    expect(trace.getSpanContext(extracted)).toMatchObject({ traceId: T, spanId: S, traceFlags: 0 });
    expect(extracted.setValue(Symbol("k"), 1).getValue(Symbol.for("nothing"))).toBeUndefined();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it("keeps a caller's tracestate: such a request takes the SDK's way, and passes both on", async () => {
    await start({ OTEL_TRACES_SAMPLER: "parentbased_always_on" });
    const started = startServerTrace("test", `00-${T}-${S}-00`, "vendor=abc", name);
    expect(started?.span?.isRecording()).toBe(false);
    const headers = withContext(started?.context, () => injected((w) => injectContext(w)));
    expect(headers.tracestate).toBe("vendor=abc");
    expect(headers.traceparent).toMatch(new RegExp(`^00-${T}-[0-9a-f]{16}-00$`));
  });
});

describe("a sampled request", () => {
  it("gets the SDK's span, a child of the caller's, and its children are recorded under it", async () => {
    await start({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" });
    const started = startServerTrace("test", `00-${T}-${S}-01`, undefined, name);
    const span = started?.span;
    expect(span?.isRecording()).toBe(true);
    expect(started?.traceparent).toBe(`00-${T}-${span?.spanContext().spanId}-01`);
    await withContext(started?.context, () =>
      inSpan("test", "child", {}, async (child) => {
        expect(child?.isRecording()).toBe(true);
        expect(currentIds()).toEqual({ trace_id: T, span_id: child?.spanContext().spanId });
      }),
    );
    span?.end();
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => [s.name, s.parentSpanContext?.spanId])).toEqual([
      ["child", span?.spanContext().spanId],
      ["GET /thing", S],
    ]);
  });

  // Its context is made only when something asks more of it than its span (tracing.ts, `SpanContext`):
  // it must answer as `trace.setSpan(parent, span)` would.
  it("runs in a context that holds its span and its parent's values, as the API's would", async () => {
    await start({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "1" });
    const key = createContextKey("test key");
    const started = startServerTrace("test", undefined, undefined, name);
    const span = started?.span;
    const ctx = started?.context ?? ROOT_CONTEXT;
    expect(span?.isRecording()).toBe(true);
    expect(trace.getSpan(ctx)).toBe(span);
    expect(ctx.getValue(key)).toBeUndefined();
    // A value set under it: the span is still there, and the value.
    const withValue = ctx.setValue(key, "v");
    expect(trace.getSpan(withValue)).toBe(span);
    expect(withValue.getValue(key)).toBe("v");
    expect(trace.getSpan(trace.deleteSpan(ctx))).toBeUndefined();
    // A child started in it is the span's child, and what it passes on is the span's.
    const headers = injected((write) => propagation.inject(ctx, write, { set: (w, k, v) => w(k, v) }));
    expect(headers.traceparent).toBe(started?.traceparent);
    withContext(ctx, () => {
      expect(currentIds()).toEqual({
        trace_id: span?.spanContext().traceId,
        span_id: span?.spanContext().spanId,
      });
      const child = startSpan("test", "child");
      expect(child?.spanContext().traceId).toBe(span?.spanContext().traceId);
      child?.end();
    });
    span?.end();
    expect(exporter.getFinishedSpans().map((s) => [s.name, s.parentSpanContext?.spanId])).toEqual([
      ["child", span?.spanContext().spanId],
      ["GET /thing", undefined],
    ]);
  });

  // A new trace's decision is worked out from its id's bytes (tracing.ts, `ratioBound`): the same as the
  // SDK's sampler's, at every ratio.
  it.each([0.5, 0.1, 0, 1])(
    "is sampled exactly when the sampler says so of its trace id, and the span has that id (ratio %s)",
    async (r) => {
      await start({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: String(r) });
      const ratio = new TraceIdRatioBasedSampler(r);
      const recorded: string[] = [];
      const runs = 1_000;
      for (let i = 0; i < runs; i++) {
        const started = startServerTrace("test", undefined, undefined, name);
        const [, traceId, , sampled] = TRACEPARENT.exec(started?.traceparent ?? "") ?? [];
        const says =
          ratio.shouldSample(ROOT_CONTEXT, traceId as string).decision ===
          SamplingDecision.RECORD_AND_SAMPLED;
        expect(sampled).toBe(says ? "1" : "0");
        expect(started?.span !== undefined).toBe(says);
        if (started?.span) {
          expect(started.span.spanContext().traceId).toBe(traceId);
          started.span.end();
          recorded.push(traceId as string);
        }
      }
      // Both kinds occurred between the ends (at 0.1 over 1,000, none sampled is a 10^-46 chance).
      if (r === 0) expect(recorded).toEqual([]);
      else if (r === 1) expect(recorded).toHaveLength(runs);
      else {
        expect(recorded.length).toBeGreaterThan(0);
        expect(recorded.length).toBeLessThan(runs);
      }
      expect(exporter.getFinishedSpans().map((s) => s.spanContext().traceId)).toEqual(recorded);
      // Every id is new.
      expect(new Set(recorded).size).toBe(recorded.length);
    },
  );
});

describe("a sampler that does not follow the parent (traceidratio)", () => {
  it("still answers an unsampled root cheaply, but asks the SDK about each span under it", async () => {
    await start({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" });
    const started = startServerTrace("test", undefined, undefined, name);
    expect(started?.span).toBeUndefined();
    const [, traceId, spanId] = TRACEPARENT.exec(started?.traceparent ?? "") ?? [];
    withContext(started?.context, () => {
      const child = startSpan("test", "child");
      expect(child?.spanContext().traceId).toBe(traceId);
      expect(child?.spanContext().spanId).not.toBe(spanId);
      expect(child?.isRecording()).toBe(false);
    });
  });
});
