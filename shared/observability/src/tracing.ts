/**
 * Tracing (docs/adr/0017-tracing.md): W3C Trace Context on every hop, OpenTelemetry spans
 * exported over OTLP/HTTP (protobuf, or JSON when asked). Off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and free when off: every helper here checks one boolean first and
 * does nothing else, no context is created, carried or injected. The SDK and the exporter are imported only
 * when tracing starts: loaded, they hold about 19 MB of every process's memory (Node 24, measured).
 *
 * On, the process gets a tracer provider (the sampler from `OTEL_TRACES_SAMPLER`/`_ARG`, the resource from
 * `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and the service's name, version and instance), the
 * AsyncLocalStorage context manager and the W3C `traceparent`/`tracestate` propagator. The helpers below
 * are what the rest of the code uses: spans for a hop, context into and out of headers (NATS, HTTP, a
 * stored event or job), and the ids of the current span for log lines.
 */
import { randomBytes } from "node:crypto";

import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  isSpanContextValid,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
  TraceFlags,
  type Tracer,
} from "@opentelemetry/api";
import type { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import type * as Core from "@opentelemetry/core";
import type * as SdkTrace from "@opentelemetry/sdk-trace";
import type {
  IdGenerator,
  Sampler,
  SamplingResult,
  SpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";

import type { WorkerSpanExporter } from "./worker-exporter.js";

export { type Context, type Span, SpanKind };

/** Whether spans are made and context carried: one check on every hot path. */
let enabled = false;
let provider: TracerProvider | undefined;
/** The OTLP exporter, when tracing exports (not in tests that hand their own processors). */
let spanExporter: WorkerSpanExporter | undefined;
let contextManager: AsyncLocalStorageContextManager | undefined;
/**
 * Whether a span whose parent is not sampled is never sampled either (a parent-based sampler, or one that
 * samples nothing): then the span of an unsampled trace is its parent's, and no new one is made.
 */
let followsParent = false;
let core: typeof Core | undefined;
/** The sampler's "no" (the SDK's enum, loaded with it). */
let notRecorded: SdkTrace.SamplingDecision | undefined;

export const tracingEnabled = (): boolean => enabled;

export interface TracingIdentity {
  /** The service's name (the default `service.name`). */
  readonly service: string;
  readonly version: string;
  /** This replica (`service.instance.id`). */
  readonly instance: string;
}

/** `a=1,b=2` (the OTEL list format, values URL-encoded) as a record. */
export function parseOtelList(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (text ?? "").split(",")) {
    const eq = part.indexOf("=");
    if (eq <= 0) continue;
    const key = part.slice(0, eq).trim();
    try {
      out[key] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      out[key] = part.slice(eq + 1).trim();
    }
  }
  return out;
}

/** A ratio sampler's ratio, `OTEL_TRACES_SAMPLER_ARG`: 0 to 1, anything else (or none) 1. */
function samplerRatio(env: Readonly<Record<string, string | undefined>>): number {
  const r = Number(env.OTEL_TRACES_SAMPLER_ARG ?? "1");
  return Number.isFinite(r) && r >= 0 && r <= 1 ? r : 1;
}

/** The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name (the SDK's default: parent-based, always on). */
export function samplerFrom(
  env: Readonly<Record<string, string | undefined>>,
  sdk: Pick<
    typeof SdkTrace,
    "AlwaysOffSampler" | "AlwaysOnSampler" | "ParentBasedSampler" | "TraceIdRatioBasedSampler"
  >,
): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = sdk;
  const ratio = () => samplerRatio(env);
  switch ((env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on").trim()) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio());
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * The OTLP/HTTP encoding: `http/protobuf` (the OpenTelemetry default, and cheaper to serialise) unless
 * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL` says `http/json`.
 */
export function tracesProtocol(
  env: Readonly<Record<string, string | undefined>>,
): "http/protobuf" | "http/json" {
  const named = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? "").trim();
  return named === "http/json" ? "http/json" : "http/protobuf";
}

/** The OTLP/HTTP traces endpoint the environment names, or undefined: tracing stays off. */
export function tracesEndpoint(env: Readonly<Record<string, string | undefined>>): string | undefined {
  if (env.OTEL_SDK_DISABLED === "true" || env.OTEL_TRACES_EXPORTER === "none") return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, "")}/v1/traces` : undefined;
}

/** A whole number above 0 the variable names, or undefined. */
const positiveInteger = (text: string | undefined): number | undefined => {
  const n = Number(text);
  return text !== undefined && text.trim() !== "" && Number.isInteger(n) && n > 0 ? n : undefined;
};

/** The batch span processor's settings from the standard `OTEL_BSP_*` variables (the SDK's defaults otherwise). */
export function batchOptions(env: Readonly<Record<string, string | undefined>>): {
  maxExportBatchSize?: number;
  scheduledDelayMillis?: number;
  maxQueueSize?: number;
  exportTimeoutMillis?: number;
} {
  const options = {
    maxExportBatchSize: positiveInteger(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE),
    scheduledDelayMillis: positiveInteger(env.OTEL_BSP_SCHEDULE_DELAY),
    maxQueueSize: positiveInteger(env.OTEL_BSP_MAX_QUEUE_SIZE),
    exportTimeoutMillis: positiveInteger(env.OTEL_BSP_EXPORT_TIMEOUT),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

/** Random bytes drawn at once for many ids: 42 requests' trace and span ids. */
const ID_POOL_BYTES = 1_024;

/**
 * Trace and span ids, random and drawn from a pool of cryptographically random bytes made at once and
 * written out as hex in one go. (The SDK's generator makes each id from `Math.random` through a buffer and
 * a hex encoding of its own, which was the largest part of what an unsampled request cost.) The ids of an
 * unsampled request are slices of that text: they die with the request. The ids the SDK asks for (a
 * sampled span's, which waits in a batch) are strings of their own: a slice would keep the whole pool's
 * text alive with it, and that text was promoted to the old generation with every sampled span. The next
 * trace id can also be handed to it: `startServerTrace` asks the sampler about a trace id before deciding
 * whether the SDK makes the span at all, and the SDK's span must then have that id (the one the sampler
 * said yes to).
 */
class PooledIdGenerator implements IdGenerator {
  next: string | undefined;
  /** `randomBytes` answers a buffer of its own (not a slice of Node's shared pool). */
  #bytes = Buffer.alloc(0);
  #hex = "";
  #at = 0;

  /** `n` random bytes' offset in the pool (a fresh pool when this one is used up). */
  #take(n: number): number {
    if (this.#at + n > this.#bytes.length) {
      this.#bytes = randomBytes(ID_POOL_BYTES);
      this.#hex = this.#bytes.toString("hex");
      this.#at = 0;
    }
    const at = this.#at;
    this.#at += n;
    return at;
  }

  /**
   * A new trace: its id (a slice of the pool's text), the id's offset in the pool (`ownTraceId`), and the
   * XOR of its four 32-bit words (what the ratio sampler decides by).
   */
  newTrace(): { readonly traceId: string; readonly at: number; readonly mix: number } {
    for (;;) {
      const at = this.#take(16);
      const b = this.#bytes;
      const w0 = b.readUInt32BE(at);
      const w1 = b.readUInt32BE(at + 4);
      const w2 = b.readUInt32BE(at + 8);
      const w3 = b.readUInt32BE(at + 12);
      // All zeros is not a trace id (W3C Trace Context); one in 2^128.
      if ((w0 | w1 | w2 | w3) === 0) continue;
      return { traceId: this.#hex.slice(at * 2, at * 2 + 32), at, mix: (w0 ^ w1 ^ w2 ^ w3) >>> 0 };
    }
  }

  /** The trace id `newTrace` just drew at `at`, as a string of its own. */
  ownTraceId(at: number): string {
    return this.#bytes.toString("hex", at, at + 16);
  }

  /** A new span id's offset in the pool. */
  #spanIdAt(): number {
    for (;;) {
      const at = this.#take(8);
      // All zeros is not a span id either.
      if ((this.#bytes.readUInt32BE(at) | this.#bytes.readUInt32BE(at + 4)) !== 0) return at;
    }
  }

  /** A span id for an unsampled request: a slice of the pool's text. */
  unsampledSpanId(): string {
    const at = this.#spanIdAt();
    return this.#hex.slice(at * 2, at * 2 + 16);
  }

  generateTraceId(): string {
    const handed = this.next;
    if (handed !== undefined) {
      this.next = undefined;
      return handed;
    }
    return this.ownTraceId(this.newTrace().at);
  }

  generateSpanId(): string {
    const at = this.#spanIdAt();
    return this.#bytes.toString("hex", at, at + 8);
  }
}

/**
 * With a ratio sampler (`traceidratio`, or `parentbased_traceidratio` for a request without a parent),
 * the bound a trace id's mix must stay under to be sampled: the SDK's own rule (`TraceIdRatioBasedSampler`:
 * the XOR of the id's four 32-bit words, under the ratio's share of 2^32 - 1, or 2^32 at ratio 1), worked
 * out from the id's bytes instead of parsing its text again. Undefined with any other sampler: the SDK's
 * is asked.
 */
export function ratioBound(env: Readonly<Record<string, string | undefined>>): number | undefined {
  const name = (env.OTEL_TRACES_SAMPLER ?? "").trim();
  if (name !== "traceidratio" && name !== "parentbased_traceidratio") return undefined;
  const ratio = samplerRatio(env);
  return ratio === 1 ? 2 ** 32 : Math.floor(ratio * 0xffffffff);
}
/**
 * The provider's sampler (the configured one, which `startServerTrace` asks first), with one shortcut:
 * the new trace `startServerTrace` has just decided to sample (by the ratio sampler's own rule, from its
 * id's bytes) is not decided again from its id's text (the SDK's ratio sampler checks and parses all 32
 * hex digits). Any other span is the configured sampler's.
 */
class DecidedSampler implements Sampler {
  /** The trace id decided for, while its span is made. */
  decided: string | undefined;
  constructor(
    readonly configured: Sampler,
    private readonly yes: SamplingResult,
  ) {}
  shouldSample(
    ctx: Context,
    traceId: string,
    name: string,
    kind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    return traceId === this.decided
      ? this.yes
      : this.configured.shouldSample(ctx, traceId, name, kind, attributes, links);
  }
  toString(): string {
    return this.configured.toString();
  }
}
let decider: DecidedSampler | undefined;
let rootBound: number | undefined;
let ids: PooledIdGenerator | undefined;

/**
 * The key the OpenTelemetry API keeps a context's span under, when it is the one this API version uses
 * (checked when tracing starts: `trace.getSpan` must find a value set under it); otherwise undefined, and
 * the contexts below become real ones to answer any key.
 */
let spanKey: symbol | undefined;

/**
 * What `trace.setSpan(parent, span)` is, made only when something asks more of it than its span: its span
 * is answered directly, any other key is its parent's (when the API's span key is known, `spanKey`), and the
 * real context is made when a value is set or deleted.
 */
abstract class LazySpanContext implements Context {
  #real: Context | undefined;
  abstract readonly parent: Context;
  abstract readonly span: Span;
  private get real(): Context {
    return (this.#real ??= trace.setSpan(this.parent, this.span));
  }
  getValue(key: symbol): unknown {
    if (spanKey === undefined) return this.real.getValue(key);
    return key === spanKey ? this.span : this.parent.getValue(key);
  }
  setValue(key: symbol, value: unknown): Context {
    return this.real.setValue(key, value);
  }
  deleteValue(key: symbol): Context {
    return this.real.deleteValue(key);
  }
}

/**
 * A sampled request's context (and `withSpan`'s). A sampled request's context on a route that sends
 * nothing on (a cached resolve) is never read; making the real one for each (a context object, a copied
 * map, three closures) cost more than its span, and those objects, unlike any other of the request's,
 * outlived two young-generation collections, were promoted, and brought an old-generation marking every few
 * seconds at 10 % sampling (measured with V8's sampling heap profiler and `--trace-gc`).
 */
class SpanContext extends LazySpanContext {
  constructor(
    readonly parent: Context,
    readonly span: Span,
  ) {
    super();
  }
}

/**
 * The context of a trace that is not sampled: its ids, and nothing else until something asks. Most
 * requests are not sampled (at 10 %, nine in ten), and making an OpenTelemetry context (a copied map, a
 * non-recording span) for each cost about 2.5 µs, the SDK's `startSpan` about 3 more: this one costs an
 * object. Its span (`trace.getSpan`) is a non-recording span made when first asked for; the helpers here
 * read its ids directly (`traceparent` into a NATS header, the ids of a log line).
 */
class UnsampledContext extends LazySpanContext {
  #span: Span | undefined;
  constructor(
    readonly traceId: string,
    readonly spanId: string,
  ) {
    super();
  }
  get parent(): Context {
    return ROOT_CONTEXT;
  }
  /** The trace's `traceparent` (not sampled). */
  get traceparent(): string {
    return `00-${this.traceId}-${this.spanId}-00`;
  }
  /** Its non-recording span: what a span started under it is, when unsampled parents decide. */
  get span(): Span {
    return (this.#span ??= trace.wrapSpanContext({
      traceId: this.traceId,
      spanId: this.spanId,
      traceFlags: TraceFlags.NONE,
    }));
  }
  /** Whether `span` is this context's own span. */
  holds(span: Span): boolean {
    return this.#span === span;
  }
}

/** The API's span key, when `trace.getSpan` reads what is set under it (see `spanKey`). */
function findSpanKey(): symbol | undefined {
  const key = createContextKey("OpenTelemetry Context Key SPAN");
  const probe = trace.wrapSpanContext({ traceId: "1".repeat(32), spanId: "1".repeat(16), traceFlags: 0 });
  return trace.getSpan(ROOT_CONTEXT.setValue(key, probe)) === probe ? key : undefined;
}

/** The active context, when it is an unsampled trace's. */
const activeUnsampled = (): UnsampledContext | undefined => {
  const active = context.active();
  return active instanceof UnsampledContext ? active : undefined;
};

/**
 * Starts tracing for this process when `env` names an OTLP endpoint (once: a later call is a no-op while
 * it runs). `processors` replaces the OTLP export (tests). `onExportError` is told of spans the export
 * lost (a request the collector refused after the exporter's retries, or spans dropped while 8 requests
 * were out); OpenTelemetry's error handler by default. Returns whether tracing is on.
 */
export async function startTracing(
  identity: TracingIdentity,
  env: Readonly<Record<string, string | undefined>>,
  processors?: readonly SpanProcessor[],
  onExportError?: (error: Error) => void,
): Promise<boolean> {
  if (enabled) return true;
  const url = tracesEndpoint(env);
  if (url === undefined && processors === undefined) return false;
  const [sdk, { AsyncLocalStorageContextManager }, coreModule, { resourceFromAttributes }] =
    await Promise.all([
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
      import("@opentelemetry/resources"),
    ]);
  let exporters = processors;
  let exporter: WorkerSpanExporter | undefined;
  if (exporters === undefined && url !== undefined) {
    const [{ JsonTraceSerializer, ProtobufTraceSerializer }, { WorkerSpanExporter }] = await Promise.all([
      import("@opentelemetry/otlp-transformer"),
      import("./worker-exporter.js"),
    ]);
    // Another start may have finished while this one loaded them.
    if (enabled) return true;
    const json = tracesProtocol(env) === "http/json";
    exporter = new WorkerSpanExporter({
      url,
      headers: parseOtelList(env.OTEL_EXPORTER_OTLP_HEADERS),
      serializer: json ? JsonTraceSerializer : ProtobufTraceSerializer,
      contentType: json ? "application/json" : "application/x-protobuf",
      onError: onExportError ?? ((error) => coreModule.globalErrorHandler(error)),
    });
    exporters = [
      new sdk.BatchSpanProcessor({
        // Small protobuf batches: a span is serialised before it outlives two young-generation collections
        // (the exporter joins them into requests of 512; worker-exporter.ts). JSON cannot be joined, so
        // its batches stay the SDK's 512.
        maxExportBatchSize: json ? 512 : 32,
        ...batchOptions(env),
        exporter,
      }),
    ];
  }
  // Another start may have finished while this one loaded the SDK.
  if (enabled) return true;
  spanExporter = exporter;
  const resource = resourceFromAttributes({
    "service.name": env.OTEL_SERVICE_NAME?.trim() || identity.service,
    "service.version": identity.version,
    "service.instance.id": identity.instance,
    ...parseOtelList(env.OTEL_RESOURCE_ATTRIBUTES),
  });
  const sampler = samplerFrom(env, sdk);
  followsParent = sampler instanceof sdk.ParentBasedSampler || sampler instanceof sdk.AlwaysOffSampler;
  ids = new PooledIdGenerator();
  rootBound = ratioBound(env);
  spanKey = findSpanKey();
  core = coreModule;
  notRecorded = sdk.SamplingDecision.NOT_RECORD;
  decider = new DecidedSampler(sampler, Object.freeze({ decision: sdk.SamplingDecision.RECORD_AND_SAMPLED }));
  provider = new sdk.TracerProvider({
    resource,
    sampler: decider,
    idGenerator: ids,
    spanProcessors: [...(exporters ?? [])],
  });
  contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new coreModule.W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  tracers.clear();
  enabled = true;
  return true;
}

/** Exports what is pending and turns tracing off (a service's stop; tests). */
export async function stopTracing(): Promise<void> {
  if (!enabled) return;
  enabled = false;
  tracers.clear();
  const stopping = provider;
  provider = undefined;
  spanExporter = undefined;
  decider = undefined;
  ids = undefined;
  rootBound = undefined;
  spanKey = undefined;
  core = undefined;
  notRecorded = undefined;
  followsParent = false;
  trace.disable();
  propagation.disable();
  context.disable();
  contextManager = undefined;
  await stopping?.shutdown().catch(() => undefined);
}

/** Exports the spans ended so far (tests, before reading the collector). */
export async function flushTracing(): Promise<void> {
  await provider?.forceFlush();
  await spanExporter?.forceFlush();
}

/** Each scope's tracer, asked for once per provider (asking the API on every span cost ~0.5 µs each). */
const tracers = new Map<string, Tracer>();
const tracer = (scope: string): Tracer => {
  let found = tracers.get(scope);
  if (found === undefined) {
    found = trace.getTracer(scope);
    tracers.set(scope, found);
  }
  return found;
};

/** Reads a carrier of string headers: NATS headers, HTTP headers, a stored record. */
export interface HeaderReader {
  get(name: string): string | undefined;
}
const getter: TextMapGetter<HeaderReader> = {
  get: (carrier, key) => carrier.get(key),
  keys: () => ["traceparent", "tracestate"],
};
const setter: TextMapSetter<(name: string, value: string) => void> = {
  set: (carrier, key, value) => carrier(key, value),
};

/**
 * The unsampled context a `traceparent` names, when it is one this process need not make a span for: the
 * sampler follows the parent, the parent is not sampled, and there is no `tracestate` to carry on.
 */
function unsampledParent(traceparent: string, tracestate: string | undefined): UnsampledContext | undefined {
  if (!followsParent || tracestate !== undefined || core === undefined) return undefined;
  const parsed = core.parseTraceParent(traceparent);
  return parsed !== null && isSpanContextValid(parsed) && (parsed.traceFlags & TraceFlags.SAMPLED) === 0
    ? new UnsampledContext(parsed.traceId, parsed.spanId)
    : undefined;
}

/** The context a `traceparent` and `tracestate` continue (the root context without a `traceparent`). */
function contextOf(traceparent: string | undefined, tracestate: string | undefined): Context {
  if (traceparent === undefined) return ROOT_CONTEXT;
  return (
    unsampledParent(traceparent, tracestate) ??
    propagation.extract(
      ROOT_CONTEXT,
      {
        get: (key: string) =>
          key === "traceparent" ? traceparent : key === "tracestate" ? tracestate : undefined,
      },
      getter,
    )
  );
}

/** The context a carrier's `traceparent`/`tracestate` continue (the root context without them). */
export function extractContext(carrier: HeaderReader): Context {
  return contextOf(carrier.get("traceparent"), carrier.get("tracestate"));
}

/** Writes the current (or `ctx`'s) trace context into a carrier by name (`traceparent`, `tracestate`). */
export function injectContext(write: (name: string, value: string) => void, ctx?: Context): void {
  if (!enabled) return;
  const from = ctx ?? context.active();
  if (from instanceof UnsampledContext) write("traceparent", from.traceparent);
  else propagation.inject(from, write, setter);
}

/**
 * Writes `span`'s context into a carrier (`traceparent`, and `tracestate` when the trace has one), without
 * making it current: a request's `traceparent`, where running the write inside the span's context would
 * cost a context switch.
 */
export function injectSpan(write: (name: string, value: string) => void, span: Span): void {
  if (!enabled) return;
  const c = span.spanContext();
  if (!isSpanContextValid(c)) return;
  write("traceparent", traceparentOf(span) as string);
  const state = c.traceState?.serialize();
  if (state) write("tracestate", state);
}

/** The current trace context as stored text (`traceparent` and, when set, `tracestate`), or null. */
export function currentTraceContext(): string | null {
  if (!enabled) return null;
  return activeUnsampled()?.traceparent ?? spanContextText(trace.getSpan(context.active()));
}

/** The context stored by `currentTraceContext`; undefined when there is none or it does not parse. */
export function storedContext(stored: string | null | undefined): Context | undefined {
  if (!enabled || !stored) return undefined;
  const [parent, state] = stored.split(";", 2);
  const ctx = contextOf(parent, state);
  // A context that does not parse (an all-zero id, a wrong version) is none: it starts no trace of its own.
  if (ctx instanceof UnsampledContext) return ctx;
  const span = trace.getSpanContext(ctx);
  return span !== undefined && isSpanContextValid(span) ? ctx : undefined;
}

/** Runs `work` in `ctx` (a stored or extracted context), or just runs it without one. */
export function withContext<T>(ctx: Context | undefined, work: () => T): T {
  return ctx === undefined ? work() : context.with(ctx, work);
}

export interface SpanOptions {
  /** When the span began (epoch ms), when it is recorded after the fact. */
  readonly startTime?: number;
  readonly kind?: SpanKind;
  readonly attributes?: Attributes;
  /** The parent: by default the current context. */
  readonly parent?: Context;
}

/**
 * Runs `work` in a new span (a child of the current context or `parent`) that ends when `work` settles,
 * its status an error when it throws; with tracing off, just runs `work`.
 */
export function inSpan<T>(
  scope: string,
  name: string,
  options: SpanOptions,
  work: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (!enabled) return work(undefined);
  const parent = options.parent ?? context.active();
  const span = startSpan(scope, name, { ...options, parent }) as Span;
  return withSpan(
    span,
    async () => {
      try {
        return await work(span);
      } catch (error) {
        failed(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
    parent,
  );
}

/** A request's trace at a server: what `startServerTrace` returns. */
export interface ServerTrace {
  /** The request's span, when the trace is sampled (the caller ends it); undefined when not. */
  readonly span: Span | undefined;
  /** The context the request runs in (`withContext`). */
  readonly context: Context;
  /** The `traceparent` to answer with: the request's span in its trace. */
  readonly traceparent: string;
}

/**
 * The trace of a request arriving at a server (the gateway's HTTP edge): it continues the caller's
 * `traceparent`/`tracestate` or starts a trace, and asks the sampler first. Most requests are not
 * sampled, and for those no OpenTelemetry span or context is made: the request runs in an unsampled
 * context holding a new span id (what it answers and passes on), and its children share that id (see
 * `startSpan`). A sampled request gets the SDK's span, of the same trace id the sampler was asked about.
 * Undefined when tracing is off. The samplers configured here read only the trace id and the parent, so
 * the span's `name` is made only for a sampled request.
 */
export function startServerTrace(
  scope: string,
  traceparent: string | undefined,
  tracestate: string | undefined,
  name: () => string,
): ServerTrace | undefined {
  if (!enabled || decider === undefined || ids === undefined) return undefined;
  const parent = contextOf(traceparent, tracestate);
  if (parent instanceof UnsampledContext) return unsampledTrace(parent.traceId, ids.unsampledSpanId());
  if (parent === ROOT_CONTEXT && rootBound !== undefined) {
    // A new trace under a ratio sampler: its decision by the sampler's own rule, from the id's bytes.
    const { traceId, at, mix } = ids.newTrace();
    if (mix >= rootBound) return unsampledTrace(traceId, ids.unsampledSpanId());
    return sampledTrace(scope, name, parent, ids.ownTraceId(at), true);
  }
  const parentSpan = trace.getSpanContext(parent);
  const continued = parentSpan !== undefined && isSpanContextValid(parentSpan);
  const traceId = continued ? parentSpan.traceId : ids.generateTraceId();
  if (
    parentSpan?.traceState === undefined &&
    decider.configured.shouldSample(parent, traceId, "", SpanKind.SERVER, {}, []).decision === notRecorded
  ) {
    return unsampledTrace(traceId, ids.unsampledSpanId());
  }
  return sampledTrace(scope, name, parent, continued ? undefined : traceId);
}

/**
 * The SDK's span of a sampled request: a new trace's id is `traceId`, the one its sampler was asked about
 * (`decided`: and said yes to, by the ratio rule, so the SDK need not ask it again).
 */
function sampledTrace(
  scope: string,
  name: () => string,
  parent: Context,
  traceId: string | undefined,
  decided = false,
): ServerTrace {
  if (ids !== undefined) ids.next = traceId;
  if (decided && decider !== undefined) decider.decided = traceId;
  const span = tracer(scope).startSpan(name(), { kind: SpanKind.SERVER }, parent);
  if (ids !== undefined) ids.next = undefined;
  if (decider !== undefined) decider.decided = undefined;
  return { span, context: new SpanContext(parent, span), traceparent: traceparentOf(span) as string };
}

const unsampledTrace = (traceId: string, spanId: string): ServerTrace => {
  const ctx = new UnsampledContext(traceId, spanId);
  return { span: undefined, context: ctx, traceparent: ctx.traceparent };
};

/**
 * Starts a span the caller ends (a request whose end is seen elsewhere), or undefined when off. Under an
 * unsampled trace's context, when the sampler follows the parent, the span is that context's own
 * non-recording span (no new id: nothing of an unsampled trace is recorded, and its context passes on
 * unchanged).
 */
export function startSpan(scope: string, name: string, options: SpanOptions = {}): Span | undefined {
  if (!enabled) return undefined;
  const parent = options.parent ?? context.active();
  if (followsParent && parent instanceof UnsampledContext) return parent.span;
  return tracer(scope).startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.startTime === undefined ? {} : { startTime: options.startTime }),
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    parent,
  );
}

/** Runs `work` with `span` current (`parent` under it), or just runs it when there is no span. */
export function withSpan<T>(span: Span | undefined, work: () => T, parent?: Context): T {
  if (span === undefined) return work();
  const base = parent ?? context.active();
  // An unsampled trace's own span (`startSpan` under it): its context is the one to run in.
  if (base instanceof UnsampledContext && base.holds(span)) {
    return base === context.active() ? work() : context.with(base, work);
  }
  return context.with(new SpanContext(base, span), work);
}

/** Marks a span failed with the error's message (never its data). */
export function failed(span: Span | undefined, error: unknown): void {
  if (span === undefined) return;
  span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message ?? String(error) });
}

/** `traceparent` of a span (for an HTTP answer), or undefined. */
export function traceparentOf(span: Span | undefined): string | undefined {
  if (span === undefined) return undefined;
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-0${(c.traceFlags & 1).toString(16)}`;
}

/** A span's context as stored text (`traceparent[;tracestate]`), for work it hands on (a job), or null. */
export function spanContextText(span: Span | undefined): string | null {
  if (span === undefined || !trace.isSpanContextValid(span.spanContext())) return null;
  const parent = traceparentOf(span) as string;
  const state = span.spanContext().traceState?.serialize();
  return state ? `${parent};${state}` : parent;
}

/** The ids of the current span, for a log line: `{ trace_id, span_id }`, or undefined. */
export function currentIds(): { trace_id: string; span_id: string } | undefined {
  if (!enabled) return undefined;
  const unsampled = activeUnsampled();
  if (unsampled !== undefined) return { trace_id: unsampled.traceId, span_id: unsampled.spanId };
  const span = trace.getSpan(context.active());
  if (span === undefined) return undefined;
  const c = span.spanContext();
  return trace.isSpanContextValid(c) ? { trace_id: c.traceId, span_id: c.spanId } : undefined;
}
