/**
 * The diagnostics recorder's rules through the routes' contracts, with the recording and its entries in
 * memory: no NATS. One recording at a time (a running one is a 409, one past its time is not); a start
 * or stop that loses a compare-and-set race is a 409 or yields to the winner; a recording stops itself
 * when its time is up or its entries are full; entries are read back in order, page by page, without
 * an earlier recording's stragglers.
 */
import { caller, callRoute, jobRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import type { Logger } from "@svc/observability";
import type { RecordedEntry, RecordingState } from "@svc/runtime";
import { beforeEach, describe, expect, it } from "vitest";

import { type Current, Recorder, type RecordingStore } from "./recorder.js";

/** The KV key and the entries stream in memory, with a revision per write as the bucket keeps. */
class MemoryRecordings implements RecordingStore {
  private state: Current | null = null;
  entries: Array<{ seq: number; entry: RecordedEntry | null }> = [];
  private seq = 0;
  maxEntries = Infinity;
  /** Set to make the next write lose to another writer, who wrote `meanwhile` first. */
  race: RecordingState | undefined;

  async current() {
    return this.state;
  }

  async write(state: RecordingState, revision: number | null) {
    if (this.race !== undefined) {
      this.state = { state: this.race, revision: (this.state?.revision ?? 0) + 1 };
      this.race = undefined;
    }
    if ((this.state?.revision ?? null) !== revision) return false;
    this.state = { state, revision: (revision ?? 0) + 1 };
    return true;
  }

  async reset(maxEntries: number) {
    this.entries = [];
    this.maxEntries = maxEntries;
  }

  async bounds() {
    if (this.seq === 0) return undefined;
    return {
      count: this.entries.length,
      first: this.entries[0]?.seq ?? this.seq + 1,
      last: this.entries.at(-1)?.seq ?? this.seq,
    };
  }

  async read(first: number, count: number, last: number) {
    return this.entries.filter((e) => e.seq >= first && e.seq <= last).slice(0, count);
  }

  /** What a tap publishes; refused past the limit, as the stream's discard policy does. */
  publish(recordingId: string, text: string | null) {
    if (this.entries.length >= this.maxEntries) return;
    this.entries.push({
      seq: ++this.seq,
      entry:
        text === null
          ? null
          : {
              recordingId,
              atUtc: new Date(0).toISOString(),
              service: "rbac",
              instance: "rbac-1",
              kind: "database",
              text,
              durationMs: 1,
              outcome: "ok",
            },
    });
  }
}

const quiet = { info: () => undefined } as unknown as Logger;
const operator = caller(["diagnostics.record"]);

let store: MemoryRecordings;
let clock: number;
let recorder: Recorder;
beforeEach(() => {
  store = new MemoryRecordings();
  clock = Date.parse("2026-11-27T10:00:00.000Z");
  recorder = new Recorder(store, quiet, () => clock);
});

const start = (body: Record<string, unknown> = {}) =>
  callRoute(jobRoutes["diagnostics.start"], (req) => recorder.startRecording(req), {
    principal: operator,
    params: {},
    query: {},
    body,
  });
const stop = () =>
  callRoute(jobRoutes["diagnostics.stop"], () => recorder.stopRecording(), {
    principal: operator,
    params: {},
    query: {},
    body: null,
  });
const read = (query: Record<string, unknown> = {}) =>
  callRoute(jobRoutes["diagnostics.get"], (req) => recorder.read(req), {
    principal: operator,
    params: {},
    query,
    body: null,
  });

describe("the diagnostics recorder", () => {
  it("starts one recording at a time, with its limits, and a new one once the last is stopped or over", async () => {
    const made = await start({ maxDurationSeconds: 30, maxEntries: 50, kinds: ["nats"] });
    expect(made).toMatchObject({
      status: 201,
      headers: { location: "/api/diagnostics/recorder" },
      body: {
        status: "recording",
        kinds: ["nats"],
        maxEntries: 50,
        entryCount: 0,
        startedAtUtc: "2026-11-27T10:00:00.000Z",
        stopsAtUtc: "2026-11-27T10:00:30.000Z",
        startedBy: "op",
      },
    });
    expect(store.maxEntries).toBe(50);
    await expect(start()).rejects.toMatchObject({ code: ErrorCode.Conflict });
    // Past its time it reads as stopped by time, and a new one may start.
    clock += 30_000;
    expect((await read()).body).toMatchObject({ status: "stopped", stopReason: "time" });
    const next = await start();
    expect(next.body?.id).not.toBe(made.body?.id);
    expect(next.body).toMatchObject({ kinds: ["database", "nats"], maxEntries: 1_000 });
    expect((await stop()).body).toMatchObject({ status: "stopped", stopReason: "operator" });
    expect((await start()).status).toBe(201);
  });

  it("answers 404 before the first recording, and a stop of a stopped one changes nothing", async () => {
    await expect(stop()).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(read()).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await start();
    clock += 5_000;
    const stopped = await stop();
    expect(stopped.body?.stoppedAtUtc).toBe("2026-11-27T10:00:05.000Z");
    clock += 5_000;
    expect((await stop()).body?.stoppedAtUtc).toBe("2026-11-27T10:00:05.000Z");
  });

  it("loses a start race with a 409, and a stop race to whatever the winner wrote", async () => {
    await start();
    await stop();
    const winner = { ...(await store.current())!.state, id: "someone-elses", status: "recording" as const };
    store.race = winner;
    await expect(start()).rejects.toMatchObject({ code: ErrorCode.Conflict });
    expect((await store.current())?.state.id).toBe("someone-elses");
    // Stopping while another replica stops it first: the answer is what that replica wrote.
    store.race = {
      ...winner,
      status: "stopped",
      stopReason: "entries",
      stoppedAtUtc: "2026-11-27T10:00:01.000Z",
    };
    expect((await stop()).body).toMatchObject({
      id: "someone-elses",
      status: "stopped",
      stopReason: "entries",
    });
  });

  it("stops itself when its time is up or its entries are full, and not before", async () => {
    const id = (await start({ maxEntries: 3, maxDurationSeconds: 60 })).body?.id as string;
    store.publish(id, "SELECT 1");
    await recorder.stopIfDone();
    expect((await store.current())?.state.status).toBe("recording");
    store.publish(id, "SELECT 2");
    store.publish(id, "SELECT 3");
    store.publish(id, "SELECT 4");
    await recorder.stopIfDone();
    expect((await store.current())?.state).toMatchObject({ status: "stopped", stopReason: "entries" });
    await start({ maxDurationSeconds: 10 });
    clock += 10_000;
    await recorder.stopIfDone();
    expect((await store.current())?.state).toMatchObject({
      status: "stopped",
      stopReason: "time",
      stoppedAtUtc: "2026-11-27T10:00:10.000Z",
    });
  });

  it("reads the entries back in order, page by page, without an earlier recording's stragglers", async () => {
    const id = (await start()).body?.id as string;
    store.publish("an-earlier-recording", "SELECT 'late'");
    for (let i = 1; i <= 4; i++) store.publish(id, `SELECT ${i}`);
    store.publish(id, null);
    store.publish(id, "SELECT 5");
    const first = await read({ limit: 3 });
    expect(first.body?.items.map((e) => e.text)).toEqual(["SELECT 1", "SELECT 2"]);
    expect(first.body?.items[0]).not.toHaveProperty("recordingId");
    expect(first.body?.entryCount).toBe(7);
    const second = await read({ limit: 3, cursor: first.body?.nextCursor });
    expect(second.body?.items.map((e) => e.text)).toEqual(["SELECT 3", "SELECT 4"]);
    const last = await read({ limit: 3, cursor: second.body?.nextCursor });
    expect(last.body?.items.map((e) => e.text)).toEqual(["SELECT 5"]);
    expect(last.body?.nextCursor).toBeNull();
  });
});
