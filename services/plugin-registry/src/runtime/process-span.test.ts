import { startTracing, stopTracing } from "@svc/observability";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { recordProcessSpan } from "./process-span.js";

/** The spans ended while tracing is on (a span processor of the test's own: nothing is exported). */
interface Ended {
  name: string;
  startTime: [number, number];
  endTime: [number, number];
  attributes: Record<string, unknown>;
  spanContext(): { traceId: string };
  parentSpanContext?: { spanId: string };
  status: { code: number };
}
const ended: Ended[] = [];
const collect = {
  onStart: () => undefined,
  onEnd: (span: Ended) => void ended.push(span),
  forceFlush: async () => undefined,
  shutdown: async () => undefined,
};

beforeAll(async () => {
  await startTracing({ service: "process-span-test", version: "0", instance: "t" }, {}, [collect]);
});
afterAll(() => stopTracing());
beforeEach(() => {
  ended.length = 0;
});

const plugin = { pluginId: "hello", version: "1.0.0" };
const trace = "0af7651916cd43dd8448eb211c80319c";
const caller = `00-${trace}-b7ad6b7169203331-01`;
const ms = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6;

describe("a plugin process's span report, which the host does not trust", () => {
  it("records a well-formed report as a span of the caller's trace", () => {
    const now = Date.now();
    expect(
      recordProcessSpan(
        plugin,
        { traceparent: caller, handler: "greet", started: now - 20, ended: now - 5, outcome: "ok" },
        now,
      ),
    ).toBe(true);
    expect(ended).toHaveLength(1);
    const span = ended[0] as Ended;
    expect(span.name).toBe("plugin hello greet");
    expect(span.spanContext().traceId).toBe(trace);
    expect(span.parentSpanContext?.spanId).toBe("b7ad6b7169203331");
    expect(ms(span.endTime) - ms(span.startTime)).toBeCloseTo(15, 0);
  });

  it("records nothing for a traceparent that is not well-formed, or times that are not numbers", () => {
    const now = Date.now();
    for (const traceparent of [
      undefined,
      42,
      "",
      "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
      `${caller}\r\nx-evil: 1`,
      `${caller} `,
      "x".repeat(100_000),
    ]) {
      expect(
        recordProcessSpan(
          plugin,
          { traceparent, handler: "h", started: now, ended: now, outcome: "ok" },
          now,
        ),
      ).toBe(false);
    }
    for (const [started, ended_] of [
      ["1", now],
      [now, Number.NaN],
      [Number.NEGATIVE_INFINITY, now],
      [null, null],
    ]) {
      expect(
        recordProcessSpan(
          plugin,
          { traceparent: caller, handler: "h", started: started, ended: ended_, outcome: "ok" },
          now,
        ),
      ).toBe(false);
    }
    expect(ended).toHaveLength(0);
  });

  it("bounds the times by the host's clock, cuts the handler's name and takes no outcome it does not know", () => {
    const now = Date.now();
    recordProcessSpan(
      plugin,
      {
        traceparent: caller,
        handler: `h${"x".repeat(10_000)}`,
        started: 0,
        ended: now + 3_600_000,
        outcome: "<script>",
      },
      now,
    );
    const span = ended[0] as Ended;
    // Ended no later than now, a minute long at most.
    expect(ms(span.endTime)).toBeLessThanOrEqual(now + 1);
    expect(ms(span.endTime) - ms(span.startTime)).toBeLessThanOrEqual(60_000 + 1);
    expect(span.name.length).toBeLessThanOrEqual("plugin hello ".length + 100);
    expect(span.attributes["svc.plugin.outcome"]).toBe("failed");
    expect(span.status.code).toBe(2);
  });
});
