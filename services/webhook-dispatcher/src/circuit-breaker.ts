/**
 * A circuit breaker per receiver (origin), its state shared by every dispatcher replica through a NATS KV
 * bucket. `threshold` consecutive failures open it for `openMs`; while open, deliveries to that receiver
 * are deferred without a request (and without spending an attempt). When the time is up the circuit is
 * half-open: exactly one delivery, across all replicas, takes the trial (a compare-and-set on the shared
 * state, held for `trialMs` in case its process dies); the others wait. Success closes the circuit,
 * failure opens it again. Each replica keeps a watched copy, so checking a closed circuit costs nothing.
 */
import { createHash } from "node:crypto";

import type { KV } from "@nats-io/kv";
import { KvWatches } from "@svc/bus";
import type { Logger } from "@svc/observability";

/** How long the bucket keeps a receiver's state after its last write (its TTL). */
export const CIRCUIT_STATE_TTL_MS = 24 * 3_600_000;

interface State {
  failures: number;
  openUntil: number;
  /** While a trial delivery runs (half-open), the time its claim on the trial ends. */
  trialUntil?: number;
}

export type Admission =
  | { readonly allowed: true; readonly trial: boolean }
  | { readonly allowed: false; readonly retryInMs: number };

export class CircuitBreaker {
  private readonly states = new Map<string, State>();
  private readonly watches = new KvWatches();

  constructor(
    private readonly kv: KV,
    private readonly threshold: number,
    private readonly openMs: number,
    private readonly log: Logger,
    /** How long a trial delivery holds the half-open circuit before another may try. */
    private readonly trialMs = 60_000,
    /** Told once per opening (the replica whose failure opened it): the `webhook.circuit-opened` event. */
    private readonly onOpened?: (origin: string, failures: number) => Promise<void>,
  ) {}

  static key(origin: string): string {
    return createHash("sha256").update(origin).digest("hex").slice(0, 32);
  }

  async start(): Promise<void> {
    // A malformed entry is skipped.
    await this.watches.renew()(this.kv, ">", (entry) => {
      if (entry.operation !== "PUT") this.states.delete(entry.key);
      else this.states.set(entry.key, JSON.parse(entry.string()) as State);
    });
  }

  stop(): void {
    this.watches.stop();
  }

  /**
   * Receivers whose circuit is open (deliveries wait) or half-open (the next one is a trial), by the
   * watched copy of the shared state. A state last written longer than `stateTtlMs` ago has expired from
   * the bucket (which tells no watcher), so it no longer counts.
   */
  counts(now = Date.now(), stateTtlMs = CIRCUIT_STATE_TTL_MS): { open: number; halfOpen: number } {
    let open = 0;
    let halfOpen = 0;
    for (const state of this.states.values()) {
      if (state.failures < this.threshold) continue;
      // Written at the failure that opened it (openUntil - openMs) or at the last trial's claim.
      const written = Math.max(state.openUntil - this.openMs, (state.trialUntil ?? 0) - this.trialMs);
      if (now - written > stateTtlMs) continue;
      if (state.openUntil > now) open += 1;
      else halfOpen += 1;
    }
    return { open, halfOpen };
  }

  /**
   * One receiver's circuit, by the watched copy of the shared state: closed (deliveries go), open (they
   * wait until `openUntil`), or half-open (the next one is a trial); with its consecutive failures.
   */
  stateOf(
    receiver: string,
    now = Date.now(),
  ): { state: "closed" | "open" | "half_open"; failures: number; openUntil: number | null } {
    const known = this.states.get(CircuitBreaker.key(receiver));
    if (known === undefined) return { state: "closed", failures: 0, openUntil: null };
    if (known.failures < this.threshold)
      return { state: "closed", failures: known.failures, openUntil: null };
    return known.openUntil > now
      ? { state: "open", failures: known.failures, openUntil: known.openUntil }
      : { state: "half_open", failures: known.failures, openUntil: null };
  }

  /** Watches the bucket again (after a NATS reconnect, the bucket provisioned anew). */
  async restart(): Promise<void> {
    await this.start();
  }

  /**
   * Whether a delivery to this origin may go now: always while the circuit is closed; never while it is
   * open (retry when it half-opens); when half-open, only for the one delivery that wins the trial.
   */
  async admit(origin: string): Promise<Admission> {
    const key = CircuitBreaker.key(origin);
    const known = this.states.get(key);
    if (known === undefined || known.failures < this.threshold) return { allowed: true, trial: false };
    for (let attempt = 0; attempt < 10; attempt++) {
      const now = Date.now();
      let entry;
      try {
        entry = await this.kv.get(key);
      } catch {
        // The shared state is out of reach: judge by the watched copy, and let no one through while open.
        return known.openUntil > now
          ? { allowed: false, retryInMs: known.openUntil - now }
          : { allowed: true, trial: true };
      }
      if (entry === null || entry.operation !== "PUT") return { allowed: true, trial: false };
      const state = JSON.parse(entry.string()) as State;
      if (state.failures < this.threshold) return { allowed: true, trial: false };
      if (state.openUntil > now) return { allowed: false, retryInMs: state.openUntil - now };
      if ((state.trialUntil ?? 0) > now) {
        // A trial is under way: look again when the circuit would half-open next if the trial fails.
        return { allowed: false, retryInMs: Math.min((state.trialUntil ?? now) - now, this.openMs) };
      }
      try {
        const next: State = { ...state, trialUntil: now + this.trialMs };
        await this.kv.update(key, JSON.stringify(next), entry.revision);
        this.states.set(key, next);
        this.log.info({ origin }, "receiver circuit half-open: one trial delivery");
        return { allowed: true, trial: true };
      } catch {
        // Another delivery took the trial meanwhile: read again.
      }
    }
    return { allowed: false, retryInMs: 1_000 };
  }

  /**
   * Resets the failure count; returns true when this closed an opened circuit. A trial's success always
   * writes the closed state: the watched copy may not have caught up with the failures yet.
   */
  async recordSuccess(origin: string, trial = false): Promise<boolean> {
    const key = CircuitBreaker.key(origin);
    const state = this.states.get(key);
    if (!trial && (state === undefined || state.failures === 0)) return false;
    const wasOpen = trial || (state?.failures ?? 0) >= this.threshold;
    this.states.set(key, { failures: 0, openUntil: 0 });
    await this.kv.put(key, JSON.stringify({ failures: 0, openUntil: 0 })).catch(() => undefined);
    if (wasOpen) this.log.info({ origin }, "receiver circuit closed");
    return wasOpen;
  }

  async recordFailure(origin: string): Promise<void> {
    const key = CircuitBreaker.key(origin);
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        const entry = await this.kv.get(key);
        const current: State =
          entry?.operation === "PUT" ? (JSON.parse(entry.string()) as State) : { failures: 0, openUntil: 0 };
        const failures = current.failures + 1;
        const next: State = {
          failures,
          openUntil: failures >= this.threshold ? Date.now() + this.openMs : 0,
        };
        if (entry === null || entry.operation !== "PUT") await this.kv.create(key, JSON.stringify(next));
        else await this.kv.update(key, JSON.stringify(next), entry.revision);
        this.states.set(key, next);
        if (failures === this.threshold) {
          this.log.warn({ origin }, "receiver circuit opened");
          await this.onOpened?.(origin, failures).catch((error: unknown) =>
            this.log.warn(
              { origin, error: (error as Error).message },
              "could not announce the opened circuit",
            ),
          );
        }
        return;
      } catch {
        // lost a race with another replica: read again
      }
    }
  }
}
