import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

import { ROOT_CONTEXT, trace } from "@opentelemetry/api";
import type { ExportResult } from "@opentelemetry/core";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { type ReadableSpan, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterEach, describe, expect, it } from "vitest";

import { type WorkerExporterOptions, WorkerSpanExporter } from "./worker-exporter.js";

interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** An OTLP/HTTP receiver answering `status`, keeping what it was sent. */
async function receiver(status = 200): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(status, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1/traces`, received, server };
}

/** Two ended spans of one trace, as the SDK hands them to an exporter. */
function spans(): ReadableSpan[] {
  const ended: ReadableSpan[] = [];
  const provider = new TracerProvider({
    spanProcessors: [
      {
        onStart: () => undefined,
        onEnd: (span) => void ended.push(span),
        forceFlush: async () => undefined,
        shutdown: async () => undefined,
      },
    ],
  });
  const tracer = provider.getTracer("test");
  const parent = tracer.startSpan("GET /workspace/public/resolve");
  tracer.startSpan("child", {}, trace.setSpan(ROOT_CONTEXT, parent)).end();
  parent.end();
  return ended;
}

/** An exporter to `url` sending protobuf or JSON (`more` sets the rest). */
const exporterTo = (url: string, encoding: "protobuf" | "json", more: Partial<WorkerExporterOptions> = {}) =>
  new WorkerSpanExporter({
    url,
    headers: {},
    ...(encoding === "json"
      ? { serializer: JsonTraceSerializer, contentType: "application/json" }
      : { serializer: ProtobufTraceSerializer, contentType: "application/x-protobuf" }),
    ...more,
  });

const exported = (exporter: WorkerSpanExporter, batch: ReadableSpan[]) =>
  new Promise<ExportResult>((resolve) => exporter.export(batch, resolve));

const open: Array<{ exporter: WorkerSpanExporter; server?: Server }> = [];
afterEach(async () => {
  for (const { exporter, server } of open.splice(0)) {
    await exporter.shutdown();
    server?.close();
  }
});

describe("the span export from a worker thread", () => {
  it("sends a batch as OTLP protobuf, with the configured headers, and reports it sent", async () => {
    const { url, received, server } = await receiver();
    const exporter = exporterTo(url, "protobuf", { headers: { "x-tenant": "acme" } });
    open.push({ exporter, server });
    const batch = spans();
    expect((await exported(exporter, batch)).code).toBe(0);
    await exporter.forceFlush();
    expect(received).toHaveLength(1);
    const [{ headers, body }] = received as [Received];
    expect(headers["content-type"]).toBe("application/x-protobuf");
    expect(headers["x-tenant"]).toBe("acme");
    // The protobuf holds the trace id as its 16 bytes and the span names as text.
    const traceId = batch[0]?.spanContext().traceId as string;
    expect(body.includes(Buffer.from(traceId, "hex"))).toBe(true);
    expect(body.includes(Buffer.from("GET /workspace/public/resolve"))).toBe(true);
  });

  it("sends JSON when asked, the spans readable as OTLP/JSON", async () => {
    const { url, received, server } = await receiver();
    const exporter = exporterTo(url, "json");
    open.push({ exporter, server });
    const batch = spans();
    expect((await exported(exporter, batch)).code).toBe(0);
    const request = JSON.parse((received[0] as Received).body.toString("utf8")) as {
      resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string; traceId: string }> }> }>;
    };
    const sent = request.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
    expect(sent.map((s) => s.name).sort()).toEqual(["GET /workspace/public/resolve", "child"]);
    expect(new Set(sent.map((s) => s.traceId))).toEqual(new Set([batch[0]?.spanContext().traceId]));
  });

  it("reports a JSON export the receiver refuses as failed", async () => {
    const { url, server } = await receiver(400);
    const exporter = exporterTo(url, "json");
    open.push({ exporter, server });
    const result = await exported(exporter, spans());
    expect(result.code).toBe(1);
    expect(result.error).toBeInstanceOf(Error);
  });

  it("joins small protobuf batches into one request of `sendAt` spans, the batches' resource spans in it", async () => {
    const { url, received, server } = await receiver();
    const exporter = exporterTo(url, "protobuf", { sendAt: 4, delayMs: 60_000 });
    open.push({ exporter, server });
    const [one, two] = [spans(), spans()];
    // Each batch is done with once serialised: the processor goes on.
    expect((await exported(exporter, one)).code).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(received).toHaveLength(0);
    expect((await exported(exporter, two)).code).toBe(0);
    for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(received).toHaveLength(1);
    const body = (received[0] as Received).body;
    for (const batch of [one, two]) {
      expect(body.includes(Buffer.from(batch[0]?.spanContext().traceId as string, "hex"))).toBe(true);
    }
    // Concatenated requests: the resource appears once per batch joined.
    const resourceSpansField = 0x0a; // field 1, length-delimited
    expect(body[0]).toBe(resourceSpansField);
  });

  it("sends a lone batch after `delayMs`, and tells `onError` of a joined request refused", async () => {
    const { url, received, server } = await receiver(400);
    const errors: Error[] = [];
    const exporter = exporterTo(url, "protobuf", { delayMs: 50, onError: (error) => errors.push(error) });
    open.push({ exporter, server });
    expect((await exported(exporter, spans())).code).toBe(0);
    for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(received).toHaveLength(1);
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/^2 spans not exported/)]);
  });

  it("fails its exports at once when its worker cannot run, instead of leaving them waiting", async () => {
    const exporter = exporterTo("http://127.0.0.1:9/v1/traces", "json", {
      workerUrl: new URL("./no-such-worker.mjs", import.meta.url),
    });
    open.push({ exporter });
    const first = await exported(exporter, spans());
    expect(first.code).toBe(1);
    expect(first.error?.message).toMatch(/worker/);
    // Once down, later batches fail without a worker to wait for.
    expect((await exported(exporter, spans())).code).toBe(1);
  });

  it("starts its worker again when it ended unasked, not sooner than `restartAfterMs` after the last start", async () => {
    const exporter = exporterTo("http://127.0.0.1:9/v1/traces", "json", {
      workerUrl: new URL("./fixtures/failing-export-worker.mjs", import.meta.url),
      restartAfterMs: 300,
    });
    open.push({ exporter });
    const first = await exported(exporter, spans());
    const [, thread] = /^thread (\d+)$/.exec(first.error?.message ?? "") ?? [];
    expect(thread).toBeDefined();
    // The worker exits just after answering; until the wait is over, exports fail without a new one.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await exported(exporter, spans())).error?.message).toMatch(/exited/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const later = await exported(exporter, spans());
    expect(later.error?.message).toMatch(/^thread \d+$/);
    expect(later.error?.message).not.toBe(first.error?.message);
  });

  it("sends what it was handed before it shuts down, and nothing after", async () => {
    const { url, received, server } = await receiver();
    const exporter = exporterTo(url, "protobuf");
    const results: ExportResult[] = [];
    const [one, two] = [spans(), spans()];
    exporter.export(one, (r) => results.push(r));
    exporter.export(two, (r) => results.push(r));
    await exporter.shutdown();
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    // Joined into one request, sent before the worker ended.
    expect(received).toHaveLength(1);
    expect((await exported(exporter, spans())).code).toBe(1);
    server.close();
  });
});
