/**
 * The diagnostics recorder's API (permission `diagnostics.record` only):
 * - `POST /api/diagnostics/recorder/start` writes a new recording into the KV key every replica's tap
 *   watches (shared/runtime/src/diagnostics.ts), after emptying the entries stream and bounding it to the
 *   recording's entry limit (the stream refuses entries past it). One recording at a time: 409 while one
 *   runs. Start and stop are compare-and-set writes, so two callers or two reaper replicas cannot both win.
 * - The recording stops by itself: every reaper replica follows the key and, only while a recording
 *   runs, checks four times a second whether its time is up or the stream holds its entry limit, and
 *   marks it stopped; the taps also stop on their own at the deadline. With no recording nothing polls.
 * - `POST /api/diagnostics/recorder/stop` stops it (reason `operator`); stopping a stopped one is a no-op.
 * - `GET /api/diagnostics/recorder` shows the last recording and a page of its entries, oldest first
 *   (`cursor` is the stream sequence to continue after). Entries are kept for 24 hours.
 */
import { randomUUID } from "node:crypto";

import {
  DiscardPolicy,
  jetstream,
  type JetStreamManager,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamState,
} from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureBucket, followKv, isStreamNotFound } from "@svc/bus";
import type { jobRoutes, ReplyOfRoute, RequestOfRoute } from "@svc/contracts";
import { ConflictError, NotFoundError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import {
  diagnosticsBucket,
  diagnosticsStream,
  diagnosticsSubject,
  readRecording,
  type RecordedEntry,
  RECORDING_KEY,
  type RecordingState,
} from "@svc/runtime";

type Routes = typeof jobRoutes;
const DAY_NS = 24 * 3_600 * 1e9;
const DEFAULT_DURATION_S = 60;
const DEFAULT_MAX_ENTRIES = 1_000;

interface Current {
  readonly state: RecordingState;
  readonly revision: number;
}

export class Recorder {
  private kv: KV | undefined;
  private jsm: JetStreamManager | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopFollowing: (() => void) | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    /** BackendHost:NatsReplicas. */
    private readonly replicas: number,
    private readonly log: Logger,
  ) {}

  private get stream() {
    return diagnosticsStream(this.prefix);
  }

  /** Opens the bucket and follows the recording (again, after a NATS server lost its store). */
  async start(): Promise<void> {
    this.kv = await ensureBucket(this.nc, diagnosticsBucket(this.prefix), {
      history: 1,
      replicas: this.replicas,
    });
    this.jsm = await jetstreamManager(this.nc);
    this.stopFollowing?.();
    this.stopFollowing = await followKv(this.kv, RECORDING_KEY, (entry) =>
      this.checkWhile(readRecording(entry)?.status === "recording"),
    );
  }

  stop(): void {
    this.stopFollowing?.();
    this.checkWhile(false);
  }

  /** Runs the self-stop check while a recording runs, and only then. */
  private checkWhile(recording: boolean): void {
    if (!recording) {
      clearInterval(this.timer);
      this.timer = undefined;
    } else if (this.timer === undefined) {
      this.timer = setInterval(() => void this.stopIfDone().catch(() => undefined), 250);
      this.timer.unref();
    }
  }

  private async current(): Promise<Current | null> {
    const entry = await this.bucket().get(RECORDING_KEY);
    const state = entry === null ? null : readRecording(entry);
    return entry === null || state === null ? null : { state, revision: entry.revision };
  }

  private bucket(): KV {
    if (this.kv === undefined) throw new Error("the recorder is not started");
    return this.kv;
  }

  private manager(): JetStreamManager {
    if (this.jsm === undefined) throw new Error("the recorder is not started");
    return this.jsm;
  }

  /** The entries stream's state; undefined before the first recording made it. */
  private async streamState(): Promise<StreamState | undefined> {
    try {
      return (await this.manager().streams.info(this.stream)).state;
    } catch {
      return undefined;
    }
  }

  /** Empties the entries stream and bounds it to `maxEntries`, creating it when missing. */
  private async resetStream(maxEntries: number): Promise<void> {
    const jsm = this.manager();
    const config = {
      max_msgs: maxEntries,
      discard: DiscardPolicy.New,
      max_age: DAY_NS,
      max_msg_size: 16 * 1024,
      num_replicas: this.replicas,
    };
    const exists = await jsm.streams.info(this.stream).then(
      () => true,
      (error: unknown) => {
        if (isStreamNotFound(error)) return false;
        throw error;
      },
    );
    if (exists) {
      // A refused update or purge fails the start: entries of the last recording must not stay.
      await jsm.streams.update(this.stream, config);
      await jsm.streams.purge(this.stream);
    } else {
      await jsm.streams.add({
        name: this.stream,
        subjects: [diagnosticsSubject(this.prefix)],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        ...config,
      });
    }
  }

  /** The recording as the API shows it: a running one past its time already reads as stopped. */
  private view(state: RecordingState, entries: number) {
    const overdue = state.status === "recording" && Date.parse(state.stopsAtUtc) <= Date.now();
    return {
      id: state.id,
      status: overdue ? ("stopped" as const) : state.status,
      kinds: state.kinds,
      maxEntries: state.maxEntries,
      entryCount: Math.min(state.maxEntries, entries),
      startedAtUtc: state.startedAtUtc,
      stopsAtUtc: state.stopsAtUtc,
      stoppedAtUtc: overdue ? state.stopsAtUtc : state.stoppedAtUtc,
      stopReason: overdue ? ("time" as const) : state.stopReason,
      startedBy: state.startedBy,
    };
  }

  /** Marks the recording stopped unless another writer changed it first (then it was stopped or replaced). */
  private async markStopped(
    current: Current,
    reason: "operator" | "time" | "entries",
  ): Promise<RecordingState> {
    const stopped: RecordingState = {
      ...current.state,
      status: "stopped",
      stoppedAtUtc: reason === "time" ? current.state.stopsAtUtc : new Date().toISOString(),
      stopReason: reason,
    };
    try {
      await this.bucket().update(RECORDING_KEY, JSON.stringify(stopped), current.revision);
      this.log.info({ recordingId: stopped.id, reason }, "diagnostics recording stopped");
      return stopped;
    } catch {
      return (await this.current())?.state ?? stopped;
    }
  }

  private async stopIfDone(): Promise<void> {
    if (this.kv === undefined) return;
    const current = await this.current();
    if (current === null || current.state.status !== "recording") return;
    if (Date.parse(current.state.stopsAtUtc) <= Date.now()) await this.markStopped(current, "time");
    else if (((await this.streamState())?.messages ?? 0) >= current.state.maxEntries)
      await this.markStopped(current, "entries");
  }

  async startRecording(
    req: RequestOfRoute<Routes["diagnostics.start"]>,
  ): Promise<ReplyOfRoute<Routes["diagnostics.start"]>> {
    const current = await this.current();
    if (
      current !== null &&
      current.state.status === "recording" &&
      Date.parse(current.state.stopsAtUtc) > Date.now()
    ) {
      throw new ConflictError(
        `A recording is running (${current.state.id}, until ${current.state.stopsAtUtc}); stop it first.`,
      );
    }
    const maxEntries = req.body.maxEntries ?? DEFAULT_MAX_ENTRIES;
    const now = Date.now();
    const state: RecordingState = {
      id: randomUUID(),
      status: "recording",
      kinds: req.body.kinds ?? ["database", "nats"],
      maxEntries,
      startedAtUtc: new Date(now).toISOString(),
      stopsAtUtc: new Date(now + (req.body.maxDurationSeconds ?? DEFAULT_DURATION_S) * 1_000).toISOString(),
      stoppedAtUtc: null,
      stopReason: null,
      startedBy: req.principal.subject,
    };
    await this.resetStream(maxEntries);
    try {
      if (current === null) await this.bucket().create(RECORDING_KEY, JSON.stringify(state));
      else await this.bucket().update(RECORDING_KEY, JSON.stringify(state), current.revision);
    } catch {
      throw new ConflictError("Another recording was started at the same moment.");
    }
    this.log.info(
      { recordingId: state.id, maxEntries, stopsAtUtc: state.stopsAtUtc, startedBy: state.startedBy },
      "diagnostics recording started",
    );
    return {
      status: 201,
      body: this.view(state, 0),
      headers: { location: "/api/diagnostics/recorder" },
    };
  }

  async stopRecording(): Promise<ReplyOfRoute<Routes["diagnostics.stop"]>> {
    const current = await this.current();
    if (current === null) throw new NotFoundError("No recording was made yet.");
    const state =
      current.state.status === "recording" ? await this.markStopped(current, "operator") : current.state;
    return { status: 200, body: this.view(state, (await this.streamState())?.messages ?? 0) };
  }

  async read(
    req: RequestOfRoute<Routes["diagnostics.get"]>,
  ): Promise<ReplyOfRoute<Routes["diagnostics.get"]>> {
    const current = await this.current();
    if (current === null) throw new NotFoundError("No recording was made yet.");
    const stream = await this.streamState();
    const view = this.view(current.state, stream?.messages ?? 0);
    const limit = req.query.limit ?? 200;
    const after = Number(req.query.cursor ?? 0);
    const items: Array<Omit<RecordedEntry, "recordingId">> = [];
    let lastSeq = after;
    const last = stream?.last_seq ?? 0;
    const first = Math.max(after + 1, stream?.first_seq ?? 1);
    if (stream !== undefined && stream.messages > 0 && first <= last) {
      const consumer = await jetstream(this.nc).consumers.get(this.stream, { opt_start_seq: first });
      const wanted = Math.min(limit, last - first + 1);
      const messages = await consumer.fetch({ max_messages: wanted, expires: 2_000 });
      for await (const m of messages) {
        lastSeq = m.seq;
        try {
          const { recordingId, ...entry } = m.json<RecordedEntry>();
          // A straggler of an earlier recording is skipped.
          if (recordingId === current.state.id) items.push(entry);
        } catch {
          // not an entry
        }
        if (m.seq >= last || m.seq - first + 1 >= wanted) break;
      }
      await consumer.delete().catch(() => undefined);
    }
    return {
      status: 200,
      body: { ...view, items, nextCursor: lastSeq < last ? String(lastSeq) : null },
    };
  }
}
