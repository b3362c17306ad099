import { type Logger, pino } from "pino";

export type { Logger };

/**
 * Structured JSON logs (pino) with the service name on every line. Anything that could carry a secret is
 * redacted by path, so a logged request or config object never leaks credentials.
 */
export function createLogger(service: string, level: string): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        "password",
        "secret",
        "*.password",
        "*.secret",
        "*.apiKey",
        "*.accessToken",
        "req.headers.authorization",
        'req.headers["x-svc-api-key"]',
        "headers.authorization",
        'headers["x-svc-api-key"]',
      ],
      censor: "[redacted]",
    },
  });
}
