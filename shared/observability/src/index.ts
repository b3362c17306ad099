export { createLogger, type Logger } from "./logger.js";
export { Counter, createMetricsRegistry, Gauge, Histogram, Registry } from "./metrics.js";
export { Observers } from "./observers.js";
export {
  type Context,
  currentIds,
  currentTraceContext,
  extractContext,
  failed,
  flushTracing,
  type HeaderReader,
  injectContext,
  inSpan,
  parseOtelList,
  samplerFrom,
  type Span,
  spanContextText,
  SpanKind,
  startSpan,
  startTracing,
  stopTracing,
  storedContext,
  traceparentOf,
  tracesEndpoint,
  tracingEnabled,
  type TracingIdentity,
  withContext,
  withSpan,
} from "./tracing.js";
