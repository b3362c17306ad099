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
 * The rules (`Recorder`) ask a `RecordingStore` port (`NatsRecordingStore` is the NATS one), so they are
 * unit-tested with the store in memory.
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
import { ensureBucket, isStreamNotFound, KvWatches } from "@svc/bus";
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

/** The recording as last written, with the revision a compare-and-set write names. */
export interface Current {
  readonly state: RecordingState;
  readonly revision: number;
}

/** The recorded entries' bounds: how many are kept, the first and last sequence. */
export interface EntryBounds {
  readonly count: number;
  readonly first: number;
  readonly last: number;
}

/**
 * Where the recording and its entries are kept (`natsRecordingStore`: a KV key every replica's tap
 * watches, and the entries stream).
 */
export interface RecordingStore {
  /** The recording as last written; null before the first. */
  current(): Promise<Current | null>;
  /**
   * Writes the recording if it is still at `revision` (null: none written yet); false when another writer
   * came first.
   */
  write(state: RecordingState, revision: number | null): Promise<boolean>;
  /** Empties the entries and bounds them to `maxEntries` (entries past it are refused). */
  reset(maxEntries: number): Promise<void>;
  /** The entries' bounds; undefined before any recording made a place for them. */
  bounds(): Promise<EntryBounds | undefined>;
  /** Up to `count` entries from sequence `first` on, no further than `last`, each with its sequence. */
  read(
    first: number,
    count: number,
    last: number,
  ): Promise<Array<{ readonly seq: number; readonly entry: RecordedEntry | null }>>;
}

/** The recording in the KV bucket its taps watch, the entries in their stream. */
export class NatsRecordingStore implements RecordingStore {
  private kv: KV | undefined;
  private jsm: JetStreamManager | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    /** BackendHost:NatsReplicas. */
    private readonly replicas: number,
  ) {}

  private get stream() {
    return diagnosticsStream(this.prefix);
  }

  /** Opens the bucket (again, after a NATS server lost its store); the opened bucket, to follow. */
  async open(): Promise<KV> {
    this.kv = await ensureBucket(this.nc, diagnosticsBucket(this.prefix), {
      history: 1,
      replicas: this.replicas,
    });
    this.jsm = await jetstreamManager(this.nc);
    return this.kv;
  }

  private bucket(): KV {
    if (this.kv === undefined) throw new Error("the recorder is not started");
    return this.kv;
  }

  private manager(): JetStreamManager {
    if (this.jsm === undefined) throw new Error("the recorder is not started");
    return this.jsm;
  }

  async current(): Promise<Current | null> {
    const entry = await this.bucket().get(RECORDING_KEY);
    const state = entry === null ? null : readRecording(entry);
    return entry === null || state === null ? null : { state, revision: entry.revision };
  }

  async write(state: RecordingState, revision: number | null): Promise<boolean> {
    try {
      if (revision === null) await this.bucket().create(RECORDING_KEY, JSON.stringify(state));
      else await this.bucket().update(RECORDING_KEY, JSON.stringify(state), revision);
      return true;
    } catch {
      return false;
    }
  }

  async reset(maxEntries: number): Promise<void> {
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

  async bounds(): Promise<EntryBounds | undefined> {
    let state: StreamState;
    try {
      state = (await this.manager().streams.info(this.stream)).state;
    } catch {
      return undefined;
    }
    return { count: state.messages, first: state.first_seq, last: state.last_seq };
  }

  async read(first: number, count: number, last: number) {
    const consumer = await jetstream(this.nc).consumers.get(this.stream, { opt_start_seq: first });
    const out: Array<{ seq: number; entry: RecordedEntry | null }> = [];
    try {
      const messages = await consumer.fetch({ max_messages: count, expires: 2_000 });
      for await (const m of messages) {
        let entry: RecordedEntry | null = null;
        try {
          entry = m.json<RecordedEntry>();
        } catch {
          // not an entry
        }
        out.push({ seq: m.seq, entry });
        if (m.seq >= last || m.seq - first + 1 >= count) break;
      }
    } finally {
      await consumer.delete().catch(() => undefined);
    }
    return out;
  }
}

/**
 * The recorder's rules over its store: one recording at a time, compare-and-set starts and stops, a
 * recording that stops itself (followed by every replica: `follow`), and the entries read back in order.
 */
export class Recorder {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: RecordingStore,
    private readonly log: Logger,
    /** Epoch milliseconds now (tests move it). */
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Follows the recording as it is written: while one runs, checks four times a second whether its time
   * is up or its entries are full, and marks it stopped. With no recording nothing polls.
   */
  follow(state: RecordingState | null): void {
    if (state?.status !== "recording") {
      clearInterval(this.timer);
      this.timer = undefined;
    } else if (this.timer === undefined) {
      this.timer = setInterval(() => void this.stopIfDone().catch(() => undefined), 250);
      this.timer.unref();
    }
  }

  stop(): void {
    this.follow(null);
  }

  /** The recording as the API shows it: a running one past its time already reads as stopped. */
  private view(state: RecordingState, entries: number) {
    const overdue = state.status === "recording" && Date.parse(state.stopsAtUtc) <= this.now();
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
      stoppedAtUtc: reason === "time" ? current.state.stopsAtUtc : new Date(this.now()).toISOString(),
      stopReason: reason,
    };
    if (await this.store.write(stopped, current.revision)) {
      this.log.info({ recordingId: stopped.id, reason }, "diagnostics recording stopped");
      return stopped;
    }
    return (await this.store.current())?.state ?? stopped;
  }

  /** Stops a running recording whose time is up or whose entries are full. */
  async stopIfDone(): Promise<void> {
    const current = await this.store.current();
    if (current === null || current.state.status !== "recording") return;
    if (Date.parse(current.state.stopsAtUtc) <= this.now()) await this.markStopped(current, "time");
    else if (((await this.store.bounds())?.count ?? 0) >= current.state.maxEntries)
      await this.markStopped(current, "entries");
  }

  async startRecording(
    req: RequestOfRoute<Routes["diagnostics.start"]>,
  ): Promise<ReplyOfRoute<Routes["diagnostics.start"]>> {
    const current = await this.store.current();
    if (
      current !== null &&
      current.state.status === "recording" &&
      Date.parse(current.state.stopsAtUtc) > this.now()
    ) {
      throw new ConflictError(
        `A recording is running (${current.state.id}, until ${current.state.stopsAtUtc}); stop it first.`,
      );
    }
    const maxEntries = req.body.maxEntries ?? DEFAULT_MAX_ENTRIES;
    const now = this.now();
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
    await this.store.reset(maxEntries);
    if (!(await this.store.write(state, current?.revision ?? null))) {
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
    const current = await this.store.current();
    if (current === null) throw new NotFoundError("No recording was made yet.");
    const state =
      current.state.status === "recording" ? await this.markStopped(current, "operator") : current.state;
    return { status: 200, body: this.view(state, (await this.store.bounds())?.count ?? 0) };
  }

  async read(
    req: RequestOfRoute<Routes["diagnostics.get"]>,
  ): Promise<ReplyOfRoute<Routes["diagnostics.get"]>> {
    const current = await this.store.current();
    if (current === null) throw new NotFoundError("No recording was made yet.");
    const bounds = await this.store.bounds();
    const view = this.view(current.state, bounds?.count ?? 0);
    const limit = req.query.limit ?? 200;
    const after = Number(req.query.cursor ?? 0);
    const items: Array<Omit<RecordedEntry, "recordingId">> = [];
    let lastSeq = after;
    const last = bounds?.last ?? 0;
    const first = Math.max(after + 1, bounds?.first ?? 1);
    if (bounds !== undefined && bounds.count > 0 && first <= last) {
      for (const { seq, entry } of await this.store.read(first, Math.min(limit, last - first + 1), last)) {
        lastSeq = seq;
        if (entry === null) continue;
        const { recordingId, ...shown } = entry;
        // A straggler of an earlier recording is skipped.
        if (recordingId === current.state.id) items.push(shown);
      }
    }
    return {
      status: 200,
      body: { ...view, items, nextCursor: lastSeq < last ? String(lastSeq) : null },
    };
  }
}

/**
 * Opens the store and has the recorder follow the recording: `start` at every provisioning (a NATS
 * server that lost its store gets the bucket again), `stop` before the service drains.
 */
export function followRecording(store: NatsRecordingStore, recorder: Recorder) {
  const watches = new KvWatches();
  return {
    start: async () => {
      const follow = watches.renew();
      const kv = await store.open();
      await follow(kv, RECORDING_KEY, (entry) => recorder.follow(readRecording(entry)));
    },
    stop: () => {
      watches.stop();
      recorder.stop();
    },
  };
}
