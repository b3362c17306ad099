/**
 * The diagnostics recorder's tap, in every service. The recording's state lives in the
 * KV bucket `<prefix>_diagnostics` (key `recording`, written by the job reaper's recorder API); every
 * replica watches it. While a recording runs, the replica's database pool reports each statement (its
 * text with the values written in as literals) and its bus each request it sends (subject, duration,
 * outcome) as entries on `<prefix>.diagnostics.entries`, which the stream `<PREFIX>_DIAGNOSTICS` keeps
 * (bounded by the recording's entry limit). A replica stops by itself when the recording's time is up or
 * it has sent the entry limit, whatever the recorder does.
 *
 * Entries hold literals (passwords' hashes, tokens' ids, personal data): they are readable only through
 * `GET /api/diagnostics/recorder` (permission `diagnostics.record`) and are never logged.
 */
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type Bus, ensureBucket, KvWatches } from "@svc/bus";
import type { Db, Sql } from "@svc/db";
import type { Logger } from "@svc/observability";

export const diagnosticsBucket = (prefix: string) => `${prefix}_diagnostics`;
export const diagnosticsSubject = (prefix: string) => `${prefix}.diagnostics.entries`;
export const diagnosticsStream = (prefix: string) =>
  `${prefix.replace(/[^A-Za-z0-9_-]/g, "_").toUpperCase()}_DIAGNOSTICS`;
export const RECORDING_KEY = "recording";
/** Longest command text or subject kept in one entry. */
export const MAX_ENTRY_TEXT = 8_000;

export type RecordingKind = "database" | "nats";

/** The recording's state as the KV key holds it. */
export interface RecordingState {
  readonly id: string;
  readonly status: "recording" | "stopped";
  readonly kinds: RecordingKind[];
  readonly maxEntries: number;
  readonly startedAtUtc: string;
  readonly stopsAtUtc: string;
  readonly stoppedAtUtc: string | null;
  readonly stopReason: "operator" | "time" | "entries" | null;
  /** Who started it (a principal's subject). */
  readonly startedBy: string;
}

/** The recording a KV entry holds: null for a deleted or malformed one. */
export function readRecording(entry: { readonly operation: string; json<T>(): T }): RecordingState | null {
  if (entry.operation !== "PUT") return null;
  try {
    return entry.json<RecordingState>();
  } catch {
    return null;
  }
}

/** One recorded operation as published (and as the recorder lists it). */
export interface RecordedEntry {
  readonly recordingId: string;
  readonly atUtc: string;
  readonly service: string;
  readonly instance: string;
  readonly kind: RecordingKind;
  /** The statement with its values written in, or the request's subject. */
  readonly text: string;
  readonly durationMs: number;
  /** `ok`, a PostgreSQL SQLSTATE or an error code. */
  readonly outcome: string;
}

/** A value as a PostgreSQL literal (for reading, not for running: the recording shows what was sent). */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (typeof value === "boolean") return value ? "TRUE" : "FALSE";
  if (value instanceof Date) return quote(value.toISOString());
  if (Buffer.isBuffer(value)) {
    const hex = value.subarray(0, 64).toString("hex");
    return `'\\x${hex}${value.length > 64 ? "…" : ""}'`;
  }
  if (Array.isArray(value)) return `ARRAY[${value.map(literal).join(", ")}]`;
  if (typeof value === "object") return quote(JSON.stringify(value));
  return typeof value === "string" ? quote(value) : quote(JSON.stringify(value) ?? "");
}

const errorCode = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "error";
};

const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** The statement's text with `$n` replaced by its value as a literal. */
export function inlineValues(statement: Sql): string {
  const values = statement.values;
  const text = statement.text.replace(/\$(\d+)/g, (match, n: string) => {
    const i = Number(n) - 1;
    return i >= 0 && i < values.length ? literal(values[i]) : match;
  });
  return text.length > MAX_ENTRY_TEXT ? `${text.slice(0, MAX_ENTRY_TEXT)}…` : text;
}

export class DiagnosticsTap {
  private readonly watches = new KvWatches();
  private stopTimer: NodeJS.Timeout | undefined;
  private recordingId: string | undefined;
  /** What removes the observers this recording added. */
  private readonly removeObservers: Array<() => void> = [];

  constructor(
    private readonly o: {
      readonly service: string;
      readonly instance: string;
      readonly prefix: string;
      /** BackendHost:NatsReplicas. */
      readonly replicas: number;
      readonly db: Db;
      readonly bus: Bus;
      readonly log: Logger;
    },
  ) {}

  /** Watches the recording's state (again, after a NATS server lost its store). */
  async start(nc: NatsConnection): Promise<void> {
    const follow = this.watches.renew();
    const kv: KV = await ensureBucket(nc, diagnosticsBucket(this.o.prefix), {
      history: 1,
      replicas: this.o.replicas,
    });
    await follow(kv, RECORDING_KEY, (entry) => this.apply(nc, readRecording(entry)));
  }

  stop(): void {
    this.watches.stop();
    this.disable();
  }

  private apply(nc: NatsConnection, state: RecordingState | null): void {
    const stopsAt = state === null ? 0 : Date.parse(state.stopsAtUtc);
    if (state === null || state.status !== "recording" || !(stopsAt > Date.now())) {
      this.disable();
      return;
    }
    if (this.recordingId === state.id) return;
    this.enable(nc, state, stopsAt);
  }

  private enable(nc: NatsConnection, state: RecordingState, stopsAt: number): void {
    this.disable();
    this.recordingId = state.id;
    const subject = diagnosticsSubject(this.o.prefix);
    let sent = 0;
    const emit = (kind: RecordingKind, text: string, durationMs: number, outcome: string) => {
      if (this.recordingId !== state.id) return;
      if (sent >= state.maxEntries || Date.now() >= stopsAt) {
        this.disable();
        return;
      }
      sent++;
      const entry: RecordedEntry = {
        recordingId: state.id,
        atUtc: new Date().toISOString(),
        service: this.o.service,
        instance: this.o.instance,
        kind,
        text,
        durationMs: Math.round(durationMs * 1_000) / 1_000,
        outcome,
      };
      try {
        nc.publish(subject, JSON.stringify(entry));
      } catch {
        // a closed connection: the entry is lost, the work goes on
      }
    };
    if (state.kinds.includes("database")) {
      this.removeObservers.push(
        this.o.db.statements.add((statement, ms, error) =>
          emit("database", inlineValues(statement), ms, error === undefined ? "ok" : errorCode(error)),
        ),
      );
    }
    if (state.kinds.includes("nats")) {
      this.removeObservers.push(
        this.o.bus.requests.add((requested, ms, outcome) =>
          emit("nats", `${this.o.prefix}.${requested}`.slice(0, MAX_ENTRY_TEXT), ms, outcome),
        ),
      );
    }
    this.stopTimer = setTimeout(() => this.disable(), stopsAt - Date.now());
    this.stopTimer.unref();
    this.o.log.info({ recordingId: state.id }, "diagnostics recording started on this replica");
  }

  private disable(): void {
    clearTimeout(this.stopTimer);
    this.stopTimer = undefined;
    for (const remove of this.removeObservers.splice(0)) remove();
    if (this.recordingId !== undefined) {
      this.o.log.info({ recordingId: this.recordingId }, "diagnostics recording stopped on this replica");
    }
    this.recordingId = undefined;
  }
}
