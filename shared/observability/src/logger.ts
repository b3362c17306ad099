import { type DestinationStream, type Logger, pino } from "pino";

import { currentIds } from "./tracing.js";

export type { Logger };

/**
 * Fields of a PostgreSQL error (node-postgres `DatabaseError`) that can quote row data: `detail` holds
 * "Failing row contains (…)" or "Key (…)=(…) already exists", `where` and `internalQuery` can quote
 * values too. They are dropped from every logged error, at any depth of `cause`.
 */
const ROW_DATA_FIELDS = ["detail", "where", "internalQuery", "parameters"] as const;

/** pino's error serializer, without the fields that can carry row data (and so secrets). */
export function serializeError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown;
  const scrub = (value: unknown, depth: number): void => {
    if (typeof value !== "object" || value === null || depth > 8) return;
    const record = value as Record<string, unknown>;
    for (const field of ROW_DATA_FIELDS) {
      if (field in record) record[field] = "[redacted]";
    }
    scrub(record.cause, depth + 1);
    if (Array.isArray(record.aggregateErrors)) for (const e of record.aggregateErrors) scrub(e, depth + 1);
  };
  scrub(serialized, 0);
  return serialized;
}

/** Field names whose value is a secret wherever it sits in a logged object (to two levels down). */
const SECRET_FIELDS = [
  "password",
  "currentPassword",
  "newPassword",
  "secret",
  "clientSecret",
  "previousSecret",
  "apiKey",
  "token",
  "accessToken",
  "refreshToken",
  "authorization",
  "cookie",
  "creds",
  "credentials",
  "seed",
  "nkeySeed",
  "privateKey",
  "signingKey",
  "secretsEncryptionKey",
] as const;

/** Headers that carry credentials, in a logged request or a logged header map. */
const SECRET_HEADERS = ["authorization", "cookie", "set-cookie", "x-svc-api-key", "proxy-authorization"];

/** What pino redacts: each secret field at the top, one and two levels down, and credential headers. */
const REDACTED_PATHS: readonly string[] = [
  ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`, `*.*.${f}`]),
  ...SECRET_HEADERS.flatMap((h) => [`req.headers["${h}"]`, `headers["${h}"]`, `*.headers["${h}"]`]),
];

/**
 * Structured JSON logs (pino) with the service name on every line, and `trace_id` and `span_id` on every
 * line written inside a trace. Anything that could carry a secret is
 * redacted by path, so a logged request or config object never leaks credentials, and a logged database
 * error never quotes a row.
 */
export function createLogger(service: string, level: string, destination?: DestinationStream): Logger {
  const options = {
    name: service,
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    // A line written inside a trace carries its ids (nothing when tracing is off).
    // (A new object each time: pino merges the line's fields into it.)
    mixin: () => currentIds() ?? {},
    serializers: { err: serializeError, error: serializeError },
    redact: {
      paths: [...REDACTED_PATHS],
      censor: "[redacted]",
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}
