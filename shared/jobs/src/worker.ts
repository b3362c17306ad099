/**
 * The worker: runs handlers for registered job types with bounded concurrency, on jobs claimed in batches.
 *
 * Per job type a lane keeps a small local queue of claimed jobs (each already leased to this worker under
 * its claim's fencing token) and runs up to `concurrency` of them at once. The lane claims again when its
 * queue runs low after a claim that took all it asked for, when PostgreSQL NOTIFYs that jobs of its type
 * were inserted, when a job it deferred for up to a minute comes due, and on a slow poll (the backstop for
 * scheduled and retried jobs). While jobs pile up and the queue runs low with a claim still out, a second
 * (plain) claim goes out beside it, never a third. Write-backs are batched: every completion and failure that
 * happens while a write is in flight goes out in the next single UPDATE, and only rows whose token still
 * matches are changed; the others are counted as stale. The leases of every held job are renewed in one
 * statement every third of the lease, so long jobs keep their claim and a job whose claim was taken over
 * is aborted.
 *
 * Stopping: lanes stop claiming, claims still out give back what they took, queued (unstarted) jobs are
 * released back to Pending without counting the attempt, running jobs finish within the grace period,
 * pending write-backs are flushed.
 */
import { type Db, type Listener, listenForNotifications } from "@svc/db";
import { inSpan, type Logger, SpanKind, startSpan, storedContext, tracingEnabled } from "@svc/observability";

import { retryDelayMs } from "./backoff.js";
import { DeferJobError, PermanentJobError, RetryLaterError } from "./errors.js";
import { FairQueue } from "./fair-queue.js";
import type { JobMetrics } from "./metrics.js";
import {
  claimJobs,
  claimJobsRoundRobin,
  forgetWorker,
  heartbeat,
  NOTIFY_CHANNEL,
  releaseJobs,
  renewLeases,
  WORKER_HEARTBEAT_MS,
} from "./queries.js";
import type { ClaimedJob, JobDefinition, JobType } from "./types.js";
import { WriteBatcher } from "./write-batcher.js";

export { DeferJobError, NOTIFY_CHANNEL, PermanentJobError, RetryLaterError };

export interface JobContext {
  /** Aborted when the worker stops past its grace period or the job's claim was taken over. */
  readonly signal: AbortSignal;
  readonly log: Logger;
}

export interface HandlerRegistration<P> {
  readonly handler: (job: ClaimedJob<P>, context: JobContext) => Promise<void>;
  /** Jobs of this type run at once in this process. */
  readonly concurrency?: number;
  /** Most jobs of this type one claim takes (default: the worker's `batchSize`, else twice `concurrency`). */
  readonly batchSize?: number;
  /** Most jobs of this type one workspace runs at once in this process (default: the worker's, else none). */
  readonly workspaceConcurrency?: number;
  /** Most jobs of this type one workspace starts per second in this process (default: the worker's, else none). */
  readonly workspaceRate?: number;
}

export interface WorkerOptions {
  readonly db: Db;
  /** For the LISTEN connection. */
  readonly databaseUrl: string;
  readonly workerId: string;
  readonly log: Logger;
  readonly metrics?: JobMetrics;
  /** Lease granted by a claim (default five minutes). */
  readonly leaseMs?: number;
  /** Backstop poll for due jobs without a notification, ms. */
  readonly pollIntervalMs?: number;
  /** Most jobs one claim takes and one lane holds unstarted. */
  readonly batchSize?: number;
  /** Most jobs of a type one workspace runs at once in this process (0 or unset: no limit but the type's). */
  readonly workspaceConcurrency?: number;
  /**
   * Most jobs of a type one workspace starts per second in this process (0 or unset: no limit): a quota
   * that keeps one workspace's backlog from taking the whole machine while it drains.
   */
  readonly workspaceRate?: number;
  /** How long stop() lets running jobs finish before aborting them, ms. */
  readonly shutdownGraceMs?: number;
}

export interface WorkerStats {
  succeeded: number;
  retried: number;
  dead: number;
  stale: number;
  released: number;
  deferred: number;
}

/** Workspaces a round-robin claim visits at most (the next claim goes on from the last). */
const WORKSPACES_PER_CLAIM = 64;
/**
 * With jobs piling up and no sign of another workspace's (no insert heard, the last round found one
 * workspace with due jobs), a lane still claims round the workspaces this often: for retries and
 * scheduled jobs that came due without a notification.
 */
const ROUND_RECHECK_MS = 1_000;
/**
 * Under a per-workspace rate, how far ahead of its even pace a workspace may start jobs (a burst of
 * `rate / 10` at most): the starts are spread over the second, not taken in one go at its start.
 */
const RATE_TOLERANCE_MS = 100;

class Lane {
  /** Claimed, not started: taken round the workspaces (fair-queue.ts). */
  readonly queue = new FairQueue<ClaimedJob>();
  readonly running = new Map<string, { job: ClaimedJob; abort: AbortController; done: Promise<void> }>();
  /** Running jobs by workspace ('' for none), for the per-workspace limit. */
  private readonly runningIn = new Map<string, number>();
  /**
   * Under a per-workspace rate: when each workspace's next job is due at its even pace (epoch ms; the
   * generic cell rate algorithm's theoretical arrival time). A job may start up to `RATE_TOLERANCE_MS`
   * before it; past entries are pruned.
   */
  private readonly paceAt = new Map<string, number>();
  /** Starts the queued jobs of a workspace held by its rate when the first of them may start. */
  private paceTimer: NodeJS.Timeout | undefined;
  private paceTimerAt = 0;
  /** Where the next round-robin claim starts (null: from the first workspace). */
  private roundFrom: string | null = null;
  /** Jobs of this type were inserted since the last round-robin claim (PostgreSQL's NOTIFY). */
  private inserted = true;
  /** The last round-robin claim took jobs of more than one workspace. */
  private othersWaiting = false;
  private lastRoundAt = 0;
  /**
   * Workspaces a claim left out (at their limit, a slot's worth queued): once one of their queued jobs
   * starts, more of theirs are probably due, so the lane claims again instead of waiting for an insert.
   */
  private readonly passedOver = new Set<string>();
  private fetching = false;
  private fetchAgain = false;
  /** The claim loop's run, while it runs (stop() waits for it). */
  private fetched: Promise<void> | undefined;
  /** A read-ahead claim in flight beside the loop's (`claimAhead`), and how many it asked for. */
  private ahead: Promise<void> | undefined;
  private aheadWanted = 0;
  /** The claim asked for may fill the queue up (an insert heard while jobs pile up), not only refill it. */
  private topUp = false;
  /**
   * Whether the last claim took all it asked for, so more are probably due. Only then does a finished job
   * claim again; otherwise the next claim waits for PostgreSQL's NOTIFY of new jobs (or the slow poll, for
   * retries that came due), so a lane fed a few jobs at a time does not claim once per finished job.
   */
  private moreDue = true;
  stopping = false;
  /** Claim again when this few are left unstarted, so the next batch arrives before the queue runs dry. */
  private readonly lowWater: number;
  /** Whether a per-workspace limit or rate applies at all. */
  private readonly limited: boolean;
  /**
   * How many queued jobs of a held workspace are enough: a claim takes no more of its jobs while it has
   * this many waiting (a slot's worth under the limit; a tenth of a second's under the rate).
   */
  private readonly slotsWorth: number;

  constructor(
    readonly type: JobType,
    private readonly registration: HandlerRegistration<unknown>,
    private readonly worker: JobWorker,
    readonly concurrency: number,
    private readonly batchSize: number,
    /** Most running at once per workspace (0: no limit but `concurrency`). */
    private readonly workspaceConcurrency: number,
    /** Most started per second per workspace (0: no limit). */
    private readonly workspaceRate = 0,
  ) {
    this.lowWater = Math.max(concurrency, Math.floor(batchSize / 2));
    this.limited = workspaceConcurrency > 0 || workspaceRate > 0;
    this.slotsWorth = Math.max(
      1,
      workspaceConcurrency,
      workspaceRate > 0 ? Math.ceil(workspaceRate / (1000 / RATE_TOLERANCE_MS)) : 0,
    );
  }

  /**
   * PostgreSQL said jobs of this type were inserted. While jobs pile up, the lane claims at once (round
   * the workspaces) with room in its queue rather than when the queue runs low: a job of a workspace
   * that had none waiting then starts next, not after what the queue holds.
   */
  heardInsert(): void {
    this.inserted = true;
    this.wake(this.moreDue);
  }

  /**
   * Claims `wanted` jobs. With jobs piling up (the last claim was full) and another workspace's jobs
   * possibly among them (an insert heard since the last round, the last round found several, or a second
   * passed), round the workspaces that have jobs waiting, so one workspace's backlog does not hold the
   * others' jobs back; otherwise simply the oldest due.
   */
  private async claim(wanted: number): Promise<ClaimedJob[]> {
    const { db, leaseMs, workerId } = this.worker;
    const now = Date.now();
    // Workspaces at their limit with a slot's worth queued already: claiming more of theirs would fill
    // the queue with jobs that cannot start.
    const full = this.held().filter((key) => this.queue.count(key) >= this.slotsWorth);
    for (const key of full) this.passedOver.add(key);
    if (
      full.length > 0 ||
      (this.moreDue && (this.inserted || this.othersWaiting || now - this.lastRoundAt >= ROUND_RECHECK_MS))
    ) {
      this.inserted = false;
      this.lastRoundAt = now;
      const round = await claimJobsRoundRobin(
        db,
        this.type,
        this.roundFrom,
        WORKSPACES_PER_CLAIM,
        wanted,
        leaseMs,
        workerId,
        this.queue.workspaces(),
        full,
      );
      this.roundFrom = round.next ?? null;
      this.othersWaiting = new Set(round.jobs.map((j) => j.workspaceKey ?? "")).size > 1;
      // Another claimer took some of the candidates: the rest comes the plain way, which passes over
      // locked rows to the next due ones (not of a workspace left out: those would not start).
      if (round.jobs.length >= wanted || full.length > 0) return round.jobs;
      const rest = await claimJobs(db, this.type, wanted - round.jobs.length, leaseMs, workerId);
      return [...round.jobs, ...rest];
    }
    return claimJobs(db, this.type, wanted, leaseMs, workerId);
  }

  /**
   * Claims more when the local queue is short (or, `topUp`, has room below a batch over the low-water
   * mark), unless a claim is already in flight.
   */
  wake(topUp = false): void {
    if (this.stopping) return;
    if (this.fetching) {
      this.fetchAgain = true;
      this.topUp ||= topUp;
      return;
    }
    this.topUp = topUp;
    if (this.startable() > this.claimBelow()) return;
    this.fetched = this.fetch();
  }

  /**
   * A second claim beside the loop's, while jobs pile up of one workspace (or of any, without a
   * per-workspace limit or turns to keep) and the queue is at its low-water mark with the loop's claim
   * still out: with short jobs the queue runs dry before one claim returns, and the lane then waits on
   * PostgreSQL with its slots idle. It takes the oldest due, as the loop's plain claim does; it is not
   * made while the lane takes the workspaces in turns. `pump` asks for it when more are due and the
   * queue is low.
   */
  private claimAhead(): void {
    if (
      this.stopping ||
      this.ahead !== undefined ||
      !this.fetching ||
      this.inserted ||
      this.othersWaiting ||
      this.workspaceConcurrency > 0 ||
      this.workspaceRate > 0
    )
      return;
    const wanted = this.batchSize;
    this.aheadWanted = wanted;
    const { db, leaseMs, workerId } = this.worker;
    this.ahead = (async () => {
      try {
        const claimedFrom = tracingEnabled() ? Date.now() : 0;
        const jobs = await claimJobs(db, this.type, wanted, leaseMs, workerId);
        if (this.stopping) return void (await this.worker.release(this.type, jobs));
        if (claimedFrom > 0) recordClaims(jobs, claimedFrom);
        this.queue.push(jobs);
        this.startQueued();
        if (jobs.length < wanted) this.moreDue = false;
      } catch (err) {
        this.worker.log.error({ err, type: this.type }, "claiming jobs failed");
      } finally {
        this.ahead = undefined;
        this.aheadWanted = 0;
      }
    })();
  }

  /** Resolves once no claim of this lane is in flight (after `stopping` is set, none starts). */
  async settled(): Promise<void> {
    while (this.fetched !== undefined || this.ahead !== undefined) {
      await Promise.all([this.fetched, this.ahead]);
      if (!this.fetching) this.fetched = undefined;
    }
  }

  /**
   * Workspaces whose jobs may not start now: running as many as the per-workspace limit allows, or ahead
   * of their pace under the per-workspace rate (none without either).
   */
  private held(now = Date.now()): string[] {
    if (!this.limited) return [];
    const cap = this.workspaceConcurrency;
    const out = cap <= 0 ? [] : [...this.runningIn].filter(([, n]) => n >= cap).map(([key]) => key);
    for (const [key, at] of this.paceAt) {
      if (at <= now) this.paceAt.delete(key);
      else if (at > now + RATE_TOLERANCE_MS && !out.includes(key)) out.push(key);
    }
    return out;
  }

  /** Whether a job of the workspace may start now (under both per-workspace limits). */
  private mayStart(key: string, now: number): boolean {
    const cap = this.workspaceConcurrency;
    if (cap > 0 && (this.runningIn.get(key) ?? 0) >= cap) return false;
    return this.workspaceRate <= 0 || (this.paceAt.get(key) ?? 0) <= now + RATE_TOLERANCE_MS;
  }

  /**
   * Queued jobs that may start when a slot frees: those of a held workspace wait for its own jobs or its
   * pace, so they neither count toward a full queue nor stop the lane from claiming the others'.
   */
  private startable(): number {
    return this.queue.length - this.heldCount();
  }

  /** Queued jobs of held workspaces (`svc_jobs_held`). */
  heldCount(): number {
    let held = 0;
    for (const key of this.held()) held += this.queue.count(key);
    return held;
  }

  /** A claim is made while the queue holds at most this many that may start. */
  private claimBelow(): number {
    return this.topUp ? this.batchSize + this.lowWater - 1 : this.lowWater;
  }

  private async fetch() {
    this.fetching = true;
    try {
      do {
        this.fetchAgain = false;
        this.topUp = false;
        const wanted = Math.min(
          this.batchSize,
          this.batchSize + this.lowWater - this.startable() - this.aheadWanted,
        );
        if (wanted <= 0 || this.stopping) break;
        let jobs: ClaimedJob[];
        const claimedFrom = tracingEnabled() ? Date.now() : 0;
        try {
          jobs = await this.claim(wanted);
        } catch (err) {
          this.worker.log.error({ err, type: this.type }, "claiming jobs failed");
          break;
        }
        if (this.stopping) {
          await this.worker.release(this.type, jobs);
          break;
        }
        if (claimedFrom > 0) recordClaims(jobs, claimedFrom);
        this.queue.push(jobs);
        // Start what was claimed without waking this loop: an empty claim must end it, or an idle lane
        // would claim again at once, forever.
        this.startQueued();
        // A full batch means more are probably due: claim again while the first ones run.
        this.moreDue = jobs.length === wanted;
        if (this.moreDue) this.fetchAgain = true;
      } while (this.fetchAgain && this.startable() <= this.claimBelow());
    } finally {
      this.fetching = false;
    }
  }

  /** When jobs this lane deferred come due (epoch ms, ascending, a few ms apart at least). */
  private wakeTimes: number[] = [];
  private wakeTimer: NodeJS.Timeout | undefined;

  /** Claims again at `at` (epoch ms), when a job this lane deferred comes due. */
  wakeAt(at: number): void {
    if (this.stopping || at - Date.now() > MAX_SELF_WAKE_MS) return;
    // Deferrals due within a few ms of one another share a wake; a lane keeps a bounded number of them.
    const due = Math.ceil(at / WAKE_GRANULARITY_MS) * WAKE_GRANULARITY_MS;
    if (this.wakeTimes.includes(due) || this.wakeTimes.length >= MAX_SELF_WAKES) return;
    this.wakeTimes.push(due);
    this.wakeTimes.sort((a, b) => a - b);
    if (this.wakeTimes[0] === due) this.armWake();
  }

  private armWake(): void {
    clearTimeout(this.wakeTimer);
    const next = this.wakeTimes[0];
    if (next === undefined) return;
    this.wakeTimer = setTimeout(
      () => {
        const now = Date.now();
        this.wakeTimes = this.wakeTimes.filter((t) => t > now);
        this.wake();
        this.armWake();
      },
      Math.max(0, next - Date.now()),
    );
    this.wakeTimer.unref();
  }

  stopWaking(): void {
    clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    this.wakeTimes = [];
    clearTimeout(this.paceTimer);
    this.paceTimer = undefined;
  }

  /** Starts queued jobs while slots are free, then claims more if the queue is short and more are due. */
  pump(): void {
    this.startQueued();
    if (this.moreDue && this.startable() <= this.lowWater) {
      this.wake();
      this.claimAhead();
    }
  }

  private startQueued(): void {
    const now = Date.now();
    const mayStart = this.limited ? (key: string) => this.mayStart(key, now) : undefined;
    while (!this.stopping && this.running.size < this.concurrency && this.queue.length > 0) {
      const job = this.queue.shift(mayStart);
      // Every workspace with jobs queued is held: at its limit, the next one to finish starts another;
      // ahead of its pace, the pace's timer does.
      if (job === undefined) return this.armPace(now);
      this.start(job, now);
    }
  }

  /** With slots free and every queued workspace held, starts again when the first one's pace allows. */
  private armPace(now: number): void {
    if (this.workspaceRate <= 0 || this.stopping) return;
    let first = Number.POSITIVE_INFINITY;
    for (const key of this.queue.workspaces()) {
      const at = this.paceAt.get(key);
      if (at !== undefined && at > now + RATE_TOLERANCE_MS) first = Math.min(first, at - RATE_TOLERANCE_MS);
    }
    if (first === Number.POSITIVE_INFINITY) return;
    if (this.paceTimer !== undefined && this.paceTimerAt <= first) return;
    clearTimeout(this.paceTimer);
    this.paceTimerAt = first;
    this.paceTimer = setTimeout(
      () => {
        this.paceTimer = undefined;
        this.pump();
      },
      Math.max(1, first - Date.now()),
    );
    this.paceTimer.unref();
  }

  private start(job: ClaimedJob, now: number) {
    const key = job.workspaceKey ?? "";
    if (this.passedOver.has(key) && this.queue.count(key) < this.slotsWorth) {
      this.passedOver.delete(key);
      this.moreDue = true;
    }
    if (this.workspaceRate > 0)
      this.paceAt.set(key, Math.max(this.paceAt.get(key) ?? 0, now) + 1000 / this.workspaceRate);
    const abort = new AbortController();
    this.worker.metrics?.claimLatency.observe(
      { type: job.type },
      Math.max(0, Date.now() - job.runAt.getTime()) / 1000,
    );
    this.runningIn.set(key, (this.runningIn.get(key) ?? 0) + 1);
    const done = this.run(job, abort).finally(() => {
      this.running.delete(job.id);
      const left = (this.runningIn.get(key) ?? 1) - 1;
      if (left === 0) this.runningIn.delete(key);
      else this.runningIn.set(key, left);
      this.pump();
    });
    this.running.set(job.id, { job, abort, done });
  }

  /**
   * Runs the handler; the slot is free as soon as it returns. The write-back joins the next batch and is
   * tracked by the batcher (stop() waits for it), so a slow database round trip does not idle the slots.
   */
  private async run(job: ClaimedJob, abort: AbortController) {
    try {
      const handle = () => this.registration.handler(job, { signal: abort.signal, log: this.worker.log });
      const parent = storedContext(job.traceContext);
      // The run is a span of the enqueuer's trace (a delivery joins the request that caused it).
      if (parent === undefined) await handle();
      else
        await inSpan(
          "jobs",
          `run ${job.type}`,
          {
            kind: SpanKind.CONSUMER,
            parent,
            attributes: { "svc.job.id": job.id, "svc.job.type": job.type, "svc.job.attempt": job.attempt },
          },
          handle,
        );
      void this.worker.batcher.complete(job);
    } catch (error) {
      if (error instanceof DeferJobError) {
        const runAt = new Date(Date.now() + Math.max(0, error.delayMs));
        // Claimed again when it is due, not at the next slow poll (a throttle defers by a second).
        void this.worker.batcher
          .defer(job, error.message, runAt, error.waitingOn)
          .then((written) => written && this.wakeAt(runAt.getTime()));
        return;
      }
      const retryAfterMs = error instanceof RetryLaterError ? error.retryAfterMs : undefined;
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      void this.worker.batcher.fail(job, {
        error: message,
        retryAt: new Date(Date.now() + retryDelayMs(job.attempt, Math.random, retryAfterMs)),
        final: error instanceof PermanentJobError,
      });
    }
  }
}

/**
 * With tracing on, the claim that took each job is a span of the job's own trace (the request that
 * enqueued it), beside its run: the claim statement serves many traces at once, so it is recorded once
 * per job, with the statement's start and end. A job enqueued outside a trace gets none.
 */
function recordClaims(jobs: readonly ClaimedJob[], from: number): void {
  const until = Date.now();
  for (const job of jobs) {
    const parent = storedContext(job.traceContext);
    if (parent === undefined) continue;
    startSpan("jobs", `claim ${job.type}`, {
      kind: SpanKind.INTERNAL,
      parent,
      startTime: from,
      attributes: {
        "svc.job.id": job.id,
        "svc.job.type": job.type,
        "svc.job.attempt": job.attempt,
        "svc.jobs.claimed": jobs.length,
      },
    })?.end(until);
  }
}

/** A deferral due later than this is left to the slow poll. */
const MAX_SELF_WAKE_MS = 60_000;
/** Deferrals due within this many ms share a wake. */
const WAKE_GRANULARITY_MS = 10;
/** The most wakes a lane keeps pending; later deferrals are left to the slow poll. */
const MAX_SELF_WAKES = 1_000;

export class JobWorker {
  readonly db: Db;
  readonly log: Logger;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly metrics: JobMetrics | undefined;
  readonly batcher: WriteBatcher;
  readonly stats: WorkerStats = { succeeded: 0, retried: 0, dead: 0, stale: 0, released: 0, deferred: 0 };
  private readonly lanes = new Map<string, Lane>();
  private readonly options: WorkerOptions;
  private listener: Listener | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private started = false;
  private stopped = false;
  private unwatchHeld: (() => void) | undefined;

  constructor(options: WorkerOptions) {
    this.options = options;
    this.db = options.db;
    this.log = options.log;
    this.workerId = options.workerId;
    this.leaseMs = options.leaseMs ?? 5 * 60_000;
    this.metrics = options.metrics;
    this.batcher = new WriteBatcher(this, options.db);
  }

  /** Runs jobs of `definition`'s type with `registration.handler`, typed by the definition's payload. */
  register<P>(definition: JobDefinition<P>, registration: HandlerRegistration<P>): this {
    if (this.started) throw new Error("register handlers before start()");
    const concurrency = registration.concurrency ?? 1;
    const batchSize = Math.max(
      registration.batchSize ?? this.options.batchSize ?? concurrency * 2,
      concurrency,
    );
    // The lane hands the handler jobs claimed by this type's name: their payloads are the definition's.
    const lane = registration as HandlerRegistration<unknown>;
    const perWorkspace = registration.workspaceConcurrency ?? this.options.workspaceConcurrency ?? 0;
    const rate = registration.workspaceRate ?? this.options.workspaceRate ?? 0;
    this.lanes.set(
      definition.type,
      new Lane(definition.type, lane, this, concurrency, batchSize, perWorkspace, rate),
    );
    return this;
  }

  recordOutcome(type: string, outcome: "succeeded" | "retried" | "dead" | "stale" | "deferred") {
    this.stats[outcome]++;
    this.metrics?.attempts.inc({ type, outcome });
    if (outcome === "stale") {
      this.metrics?.staleWritebacks.inc({ type });
      this.log.warn({ type }, "a job write-back was refused: its claim was taken over");
    }
  }

  async start(): Promise<void> {
    this.started = true;
    // Alive before it claims anything: a claim without a heartbeat is released by the reaper.
    await heartbeat(this.db, this.workerId);
    this.heartbeatTimer = setInterval(
      () =>
        void heartbeat(this.db, this.workerId).catch((err: unknown) =>
          this.log.warn({ err }, "could not write the worker's heartbeat"),
        ),
      WORKER_HEARTBEAT_MS,
    );
    this.heartbeatTimer.unref();
    await this.listen();
    for (const lane of this.lanes.values()) lane.wake();
    const poll = this.options.pollIntervalMs ?? 2_000;
    this.pollTimer = setInterval(() => {
      for (const lane of this.lanes.values()) lane.wake();
    }, poll);
    this.pollTimer.unref();
    this.renewTimer = setInterval(() => void this.renewHeld(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.renewTimer.unref();
    this.unwatchHeld = this.metrics?.watchHeld(() =>
      [...this.lanes.values()].map((lane) => [lane.type, lane.heldCount()] as const),
    );
  }

  private listen() {
    this.listener = listenForNotifications({
      databaseUrl: this.options.databaseUrl,
      channel: NOTIFY_CHANNEL,
      applicationName: "job-listener",
      log: this.log,
      // While it is away, the slow poll finds due jobs.
      onNotification: (type) => this.lanes.get(type)?.heardInsert(),
    });
    return this.listener.ready;
  }

  /** Extends the leases of all held jobs; aborts running jobs whose claim was taken over. */
  private async renewHeld() {
    const held: ClaimedJob[] = [];
    for (const lane of this.lanes.values()) {
      held.push(...lane.queue.all());
      for (const r of lane.running.values()) held.push(r.job);
    }
    if (held.length === 0) return;
    let current: Set<string>;
    try {
      current = await renewLeases(this.db, held, this.leaseMs);
    } catch (err) {
      this.log.warn({ err }, "lease renewal failed");
      return;
    }
    // Judge only the claims that were renewed: jobs claimed while the renewal ran were not in it.
    const asked = new Set(held.map((j) => `${j.id}:${j.token}`));
    const lost = (j: ClaimedJob) => asked.has(`${j.id}:${j.token}`) && !current.has(j.id);
    for (const lane of this.lanes.values()) {
      for (const r of lane.running.values()) {
        if (lost(r.job)) r.abort.abort(new Error("the job's claim was taken over"));
      }
      lane.queue.remove(lost);
    }
  }

  async release(type: string, jobs: readonly ClaimedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    try {
      this.stats.released += await releaseJobs(this.db, type, jobs);
    } catch (err) {
      this.log.warn({ err }, "could not release jobs; their leases will expire");
    }
  }

  /** Graceful stop: see the module comment. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.pollTimer);
    clearInterval(this.renewTimer);
    this.unwatchHeld?.();
    const lanes = [...this.lanes.values()];
    for (const lane of lanes) {
      lane.stopping = true;
      lane.stopWaking();
    }
    // A claim in flight gives back what it took (the lane is stopping); then the queue is given back.
    await Promise.all(lanes.map((lane) => lane.settled()));
    await Promise.all(lanes.map((lane) => this.release(lane.type, lane.queue.drain())));
    const running = lanes.flatMap((lane) => [...lane.running.values()]);
    const grace = this.options.shutdownGraceMs ?? 8_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(running.map((r) => r.done)),
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          for (const r of running) r.abort.abort(new Error("worker stopping"));
          resolve();
        }, grace);
      }),
    ]);
    clearTimeout(timer);
    await Promise.allSettled(running.map((r) => r.done));
    await this.batcher.idle();
    // Gone: whatever it still holds (a write-back that failed) is released by the next sweep.
    clearInterval(this.heartbeatTimer);
    await forgetWorker(this.db, this.workerId).catch(() => undefined);
    await this.listener?.stop();
    this.listener = undefined;
  }
}
