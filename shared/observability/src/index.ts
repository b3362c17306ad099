export { createLogger, type Logger } from "./logger.js";
export { Counter, createMetricsRegistry, Gauge, Histogram, Registry } from "./metrics.js";
export { Observers } from "./observers.js";
