/**
 * The OTLP/HTTP span exporter tracing uses (docs/adr/0017-tracing.md): each batch is serialised here, in
 * the process's own thread (protobuf, or JSON when asked), and sent from a worker thread
 * (`trace-export-worker.mjs`, OpenTelemetry's own HTTP export with its retries, backoff and timeout).
 * The process's isolate then runs no HTTP client: with one, its server code (Node's streams, sockets and
 * outgoing messages, shared by both) turned polymorphic at the first export and stayed so, about 10 % of
 * the gateway's instructions per cached request (docs/architecture.md, "Tracing").
 *
 * Protobuf batches are small (the processor hands over 32 spans at a time, so that a span is serialised
 * and dropped before it outlives two young-generation collections: held for a batch of 512, the spans
 * were promoted and the old generation's marking cost more than everything else tracing did) and are
 * joined into one request of up to `sendAt` spans, or whatever is there after `delayMs`: serialised OTLP
 * requests concatenated are one request holding all their resource spans (protobuf merges repeated
 * fields). Such a batch is reported exported once serialised; a request that fails later is reported to
 * `onError` with the number of spans it held. JSON batches go out one request each, reported when sent.
 */
import { Worker } from "node:worker_threads";

import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import type { ISerializer } from "@opentelemetry/otlp-transformer";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";

const { SUCCESS, FAILED } = ExportResultCode;

interface Answer {
  readonly id: number;
  /** The worker's answer: OpenTelemetry's own result code. */
  readonly code: ExportResultCode;
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
  /** Protobuf: spans joined into one request before it is sent (default 512). */
  readonly sendAt?: number;
  /** Protobuf: the longest a serialised batch waits to be joined by others, ms (default 1,000). */
  readonly delayMs?: number;
  /** Told of a joined request that failed (the spans are lost). */
  readonly onError?: (error: Error) => void;
  /** A worker that ended unasked is started again at the next export this long after the last start (5 s). */
  readonly restartAfterMs?: number;
}

/** The chunks in one buffer of its own. */
function joined(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Joined requests out at once; past this, further spans are dropped (a collector down or slow). */
const MAX_IN_FLIGHT = 8;

interface Request {
  readonly done: (result: ExportResult) => void;
  /** Resolved once answered (or failed). */
  readonly answered: Promise<void>;
  readonly settle: () => void;
}

export class WorkerSpanExporter implements SpanExporter {
  readonly #options: WorkerExporterOptions;
  readonly #serializer: ISerializer<ReadableSpan[], unknown>;
  readonly #pending = new Map<number, Request>();
  #worker: Worker | undefined;
  #startedAt = 0;
  /** Why the last worker ended, while none runs. */
  #ended: Error | undefined;
  #next = 0;
  #shutDown = false;
  readonly #join: boolean;
  readonly #sendAt: number;
  readonly #delayMs: number;
  readonly #onError: (error: Error) => void;
  #chunks: Uint8Array[] = [];
  #chunkSpans = 0;
  #timer: NodeJS.Timeout | undefined;
  #inFlight = 0;

  constructor(options: WorkerExporterOptions) {
    this.#options = options;
    this.#serializer = options.serializer;
    this.#join = options.contentType === "application/x-protobuf";
    this.#sendAt = options.sendAt ?? 512;
    this.#delayMs = options.delayMs ?? 1_000;
    this.#onError = options.onError ?? (() => undefined);
    this.#start();
  }

  #start(): Worker {
    const { url, headers, contentType, workerUrl } = this.#options;
    const worker = new Worker(workerUrl ?? new URL("./trace-export-worker.mjs", import.meta.url), {
      workerData: { url, headers: { ...headers }, contentType },
      // Its heap holds a batch or two of bytes at a time.
      resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 8 },
    });
    this.#worker = worker;
    this.#startedAt = Date.now();
    this.#ended = undefined;
    // The worker does not keep the process alive: a stop exports what is pending first (`shutdown`).
    worker.unref();
    worker.on("message", (answer: Answer) => {
      const request = this.#pending.get(answer.id);
      this.#pending.delete(answer.id);
      request?.done(
        answer.code === SUCCESS
          ? { code: SUCCESS }
          : { code: FAILED, error: new Error(answer.error ?? "the span export failed") },
      );
      request?.settle();
    });
    const ended = (error: Error) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      this.#ended = error;
      // Whatever it had not answered is lost with it.
      for (const request of this.#pending.values()) {
        request.done({ code: FAILED, error });
        request.settle();
      }
      this.#pending.clear();
    };
    worker.on("error", ended);
    worker.on("exit", (code) => ended(new Error(`the span export worker exited (${code})`)));
    return worker;
  }

  /** The running worker, started again when it ended unasked a while ago; else why there is none. */
  #running(): Worker | Error {
    if (this.#shutDown) return new Error("the span exporter was shut down");
    if (this.#worker !== undefined) return this.#worker;
    if (Date.now() - this.#startedAt >= (this.#options.restartAfterMs ?? 5_000)) return this.#start();
    return this.#ended ?? new Error("the span export worker is not running");
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.#shutDown) {
      return resultCallback({ code: FAILED, error: new Error("the span exporter was shut down") });
    }
    let bytes: Uint8Array | undefined;
    try {
      bytes = this.#serializer.serializeRequest(spans);
    } catch (error) {
      return resultCallback({ code: FAILED, error: error as Error });
    }
    if (bytes === undefined) {
      return resultCallback({ code: FAILED, error: new Error("the spans could not be serialised") });
    }
    if (!this.#join) return this.#post(bytes, spans.length, resultCallback);
    this.#chunks.push(bytes);
    this.#chunkSpans += spans.length;
    resultCallback({ code: SUCCESS });
    if (this.#chunkSpans >= this.#sendAt) this.#sendJoined();
    else this.#timer ??= setTimeout(() => this.#sendJoined(), this.#delayMs).unref();
  }

  /** Sends the serialised batches waiting as one request. */
  #sendJoined(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const chunks = this.#chunks;
    const spans = this.#chunkSpans;
    this.#chunks = [];
    this.#chunkSpans = 0;
    if (chunks.length === 0) return;
    if (this.#inFlight >= MAX_IN_FLIGHT) {
      return this.#onError(new Error(`${spans} spans dropped: ${MAX_IN_FLIGHT} span exports are still out`));
    }
    this.#inFlight += 1;
    this.#post(chunks.length === 1 ? (chunks[0] as Uint8Array) : joined(chunks), spans, (result) => {
      this.#inFlight -= 1;
      if (result.code !== SUCCESS) {
        this.#onError(new Error(`${spans} spans not exported: ${result.error?.message ?? "failed"}`));
      }
    });
  }

  /** Hands `bytes` to the worker; `done` is told how the request went. */
  #post(bytes: Uint8Array, spans: number, done: (result: ExportResult) => void): void {
    const worker = this.#running();
    if (worker instanceof Error) return done({ code: FAILED, error: worker });
    // The bytes move to the worker (no copy) when they are a whole buffer of their own; else a copy does
    // (a Buffer may be a view of Node's shared pool, which must never be moved).
    const own =
      !Buffer.isBuffer(bytes) &&
      bytes.byteOffset === 0 &&
      bytes.byteLength === bytes.buffer.byteLength &&
      bytes.buffer instanceof ArrayBuffer
        ? bytes
        : new Uint8Array(bytes);
    const id = this.#next++;
    this.#pending.set(id, request(done));
    worker.postMessage({ id, bytes: own, spans }, [own.buffer as ArrayBuffer]);
  }

  /** Sends what waits to be joined, and resolves once every request handed over has been answered. */
  async forceFlush(): Promise<void> {
    this.#sendJoined();
    await Promise.all([...this.#pending.values()].map((r) => r.answered));
  }

  /** Lets the worker finish what it sends (OpenTelemetry's export timeout bounds it), then ends it. */
  async shutdown(): Promise<void> {
    if (this.#shutDown) return;
    await this.forceFlush();
    this.#shutDown = true;
    const worker = this.#worker;
    // A worker that ended has nothing to finish (and would answer nothing).
    if (worker === undefined) return;
    const id = this.#next++;
    const last = request(() => undefined);
    this.#pending.set(id, last);
    worker.postMessage({ id, shutdown: true });
    await last.answered;
    this.#worker = undefined;
    await worker.terminate();
  }
}

/** A request waiting for the worker's answer. */
function request(done: (result: ExportResult) => void): Request {
  let settle = () => {};
  const answered = new Promise<void>((resolve) => (settle = resolve));
  return { done, answered, settle };
}
