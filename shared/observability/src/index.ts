export { createLogger, type Logger } from "./logger.js";
export { Counter, createMetricsRegistry, Histogram, Registry } from "./metrics.js";
