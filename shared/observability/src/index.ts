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
  injectSpan,
  inSpan,
  type ServerTrace,
  type Span,
  spanContextText,
  SpanKind,
  startServerTrace,
  startSpan,
  startTracing,
  stopTracing,
  storedContext,
  traceparentOf,
  tracingEnabled,
  type TracingIdentity,
  withContext,
  withSpan,
} from "./tracing.js";
