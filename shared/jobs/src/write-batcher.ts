/** Batched write-backs of job outcomes, each guarded by the job's fencing token. */
import type { Db } from "@svc/db";
import type { Logger } from "@svc/observability";

import {
  completeJobs,
  type Completion,
  deferJobs,
  type Deferral,
  failJobs,
  type Failure,
} from "./queries.js";
import type { ClaimedJob } from "./types.js";

/** Where the batcher reports each outcome (the worker's counters and metrics). */
export interface OutcomeSink {
  readonly log: Logger;
  recordOutcome(type: string, outcome: "succeeded" | "retried" | "dead" | "stale" | "deferred"): void;
}

/** Groups write-backs so that everything finished during one database round trip goes in the next. */
export class WriteBatcher {
  private completions: Array<Completion & { type: string; resolve: (ok: boolean) => void }> = [];
  private failures: Array<Failure & { type: string; resolve: (ok: boolean) => void }> = [];
  private deferrals: Array<Deferral & { type: string; resolve: (ok: boolean) => void }> = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly worker: OutcomeSink,
    private readonly db: Db,
  ) {}

  complete(job: ClaimedJob): Promise<boolean> {
    return new Promise((resolve) => {
      this.completions.push({ id: job.id, token: job.token, type: job.type, resolve });
      this.schedule();
    });
  }

  fail(job: ClaimedJob, failure: Omit<Failure, "id" | "token">): Promise<boolean> {
    return new Promise((resolve) => {
      this.failures.push({ id: job.id, token: job.token, type: job.type, ...failure, resolve });
      this.schedule();
    });
  }

  defer(job: ClaimedJob, reason: string, runAt: Date, waitingOn?: string): Promise<boolean> {
    return new Promise((resolve) => {
      this.deferrals.push({
        id: job.id,
        token: job.token,
        type: job.type,
        reason,
        runAt,
        waitingOn,
        resolve,
      });
      this.schedule();
    });
  }

  private schedule() {
    if (this.flushing === undefined) this.flushing = this.flushLoop();
  }

  private async flushLoop() {
    // Let every job that finishes in this turn of the event loop join the first batch.
    await new Promise((r) => setImmediate(r));
    while (this.completions.length > 0 || this.failures.length > 0 || this.deferrals.length > 0) {
      const completions = this.completions;
      const failures = this.failures;
      const deferrals = this.deferrals;
      this.completions = [];
      this.failures = [];
      this.deferrals = [];
      await Promise.all([
        this.writeCompletions(completions),
        this.writeFailures(failures),
        this.writeDeferrals(deferrals),
      ]);
    }
    this.flushing = undefined;
  }

  private async writeCompletions(
    batch: Array<Completion & { type: string; resolve: (ok: boolean) => void }>,
  ) {
    if (batch.length === 0) return;
    let accepted: Set<string>;
    try {
      accepted = await settled(() => completeJobs(this.db, batch));
    } catch (err) {
      // The outcome is unknown; the job runs again once the reaper releases it (at-least-once).
      this.worker.log.error({ err, count: batch.length }, "could not record job completions");
      for (const c of batch) c.resolve(false);
      return;
    }
    for (const c of batch) {
      const ok = accepted.has(c.id);
      this.worker.recordOutcome(c.type, ok ? "succeeded" : "stale");
      c.resolve(ok);
    }
  }

  private async writeFailures(batch: Array<Failure & { type: string; resolve: (ok: boolean) => void }>) {
    if (batch.length === 0) return;
    let states: Map<string, string>;
    try {
      states = await settled(() => failJobs(this.db, batch));
    } catch (err) {
      this.worker.log.error({ err, count: batch.length }, "could not record job failures");
      for (const f of batch) f.resolve(false);
      return;
    }
    for (const f of batch) {
      const state = states.get(f.id);
      this.worker.recordOutcome(
        f.type,
        state === undefined ? "stale" : state === "Failed" ? "dead" : "retried",
      );
      f.resolve(state !== undefined);
    }
  }

  private async writeDeferrals(batch: Array<Deferral & { type: string; resolve: (ok: boolean) => void }>) {
    if (batch.length === 0) return;
    let accepted: Set<string>;
    try {
      accepted = await settled(() => deferJobs(this.db, batch));
    } catch (err) {
      // The lease will expire and the job run again; the attempt stays counted then.
      this.worker.log.error({ err, count: batch.length }, "could not record job deferrals");
      for (const d of batch) d.resolve(false);
      return;
    }
    for (const d of batch) {
      const ok = accepted.has(d.id);
      this.worker.recordOutcome(d.type, ok ? "deferred" : "stale");
      d.resolve(ok);
    }
  }

  async idle(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
  }
}

/**
 * A write-back tried up to three times: a connection terminated under it would
 * otherwise leave the job Running until its lease expires. Each write is fenced by the claim's token, so
 * a repeat of one that did commit changes nothing (it reads as stale).
 */
async function settled<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (attempt >= 3) throw error;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
}
