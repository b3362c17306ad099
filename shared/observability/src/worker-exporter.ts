/**
 * The OTLP/HTTP span exporter tracing uses (docs/adr/0017-tracing.md): each batch is serialised here, in
 * the process's own thread (protobuf, or JSON when asked), and sent from a worker thread
 * (`trace-export-worker.mjs`, OpenTelemetry's own HTTP export with its retries, backoff and timeout).
 * The process's isolate then runs no HTTP client: with one, its server code (Node's streams, sockets and
 * outgoing messages, shared by both) turned polymorphic at the first export and stayed so, about 10 % of
 * the gateway's instructions per cached request (docs/architecture.md, "Tracing").
 */
import { Worker } from "node:worker_threads";

import type { ExportResult } from "@opentelemetry/core";
import type { ISerializer } from "@opentelemetry/otlp-transformer";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";

/** `ExportResultCode` of `@opentelemetry/core`: the worker answers with these. */
const SUCCESS = 0;
const FAILED = 1;

interface Answer {
  readonly id: number;
  readonly code: number;
  readonly error?: string;
}

export interface WorkerExporterOptions {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly serializer: ISerializer<ReadableSpan[], unknown>;
  /** `application/x-protobuf` or `application/json`, matching the serializer. */
  readonly contentType: string;
  /** The worker's module (tests); by default the one next to this module, or to the service's bundle. */
  readonly workerUrl?: URL;
}

export class WorkerSpanExporter implements SpanExporter {
  readonly #worker: Worker;
  readonly #serializer: ISerializer<ReadableSpan[], unknown>;
  readonly #pending = new Map<number, (result: ExportResult) => void>();
  #next = 0;
  #down: Error | undefined;

  constructor(options: WorkerExporterOptions) {
    this.#serializer = options.serializer;
    this.#worker = new Worker(options.workerUrl ?? new URL("./trace-export-worker.mjs", import.meta.url), {
      workerData: { url: options.url, headers: { ...options.headers }, contentType: options.contentType },
      // Its heap holds a batch or two of bytes at a time.
      resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 8 },
    });
    // The worker does not keep the process alive: a stop exports what is pending first (`shutdown`).
    this.#worker.unref();
    this.#worker.on("message", (answer: Answer) => {
      const done = this.#pending.get(answer.id);
      this.#pending.delete(answer.id);
      done?.(
        answer.code === SUCCESS
          ? { code: SUCCESS }
          : { code: FAILED, error: new Error(answer.error ?? "the span export failed") },
      );
    });
    const fail = (error: Error) => {
      this.#down ??= error;
      for (const done of this.#pending.values()) done({ code: FAILED, error });
      this.#pending.clear();
    };
    this.#worker.on("error", fail);
    this.#worker.on("exit", (code) => fail(new Error(`the span export worker exited (${code})`)));
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.#down !== undefined) return resultCallback({ code: FAILED, error: this.#down });
    let bytes: Uint8Array | undefined;
    try {
      bytes = this.#serializer.serializeRequest(spans);
    } catch (error) {
      return resultCallback({ code: FAILED, error: error as Error });
    }
    if (bytes === undefined) {
      return resultCallback({ code: FAILED, error: new Error("the spans could not be serialised") });
    }
    // The bytes move to the worker (no copy) when they are a whole buffer of their own.
    const own =
      bytes.byteOffset === 0 &&
      bytes.byteLength === bytes.buffer.byteLength &&
      !(bytes.buffer instanceof SharedArrayBuffer)
        ? bytes
        : bytes.slice();
    const id = this.#next++;
    this.#pending.set(id, resultCallback);
    this.#worker.postMessage({ id, bytes: own, spans: spans.length }, [own.buffer as ArrayBuffer]);
  }

  /** Resolves once every export handed over has been answered. */
  async forceFlush(): Promise<void> {
    const pending = [...this.#pending.keys()];
    if (pending.length === 0) return;
    await new Promise<void>((resolve) => {
      const check = () => {
        if (pending.every((id) => !this.#pending.has(id))) {
          this.#worker.off("message", check);
          resolve();
        }
      };
      this.#worker.on("message", check);
      this.#worker.once("exit", () => resolve());
    });
  }

  /** Lets the worker finish what it sends (OpenTelemetry's export timeout bounds it), then ends it. */
  async shutdown(): Promise<void> {
    if (this.#down !== undefined) return;
    await this.forceFlush();
    await new Promise<void>((resolve) => {
      const id = this.#next++;
      this.#pending.set(id, () => resolve());
      this.#worker.postMessage({ id, shutdown: true });
    });
    this.#down = new Error("the span exporter was shut down");
    await this.#worker.terminate();
  }
}
