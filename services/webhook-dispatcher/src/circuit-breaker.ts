/**
 * A circuit breaker per receiver (origin), its state shared by every dispatcher replica through a NATS KV
 * bucket. `threshold` consecutive failures open it for `openMs`; while open, deliveries to that receiver
 * fail at once (the job retries later). When the time is up one delivery goes through as a trial: success
 * closes the circuit, failure opens it again. Each replica keeps a watched copy, so checking costs nothing.
 */
import { createHash } from "node:crypto";

import type { KV, KvWatchEntry } from "@nats-io/kv";
import type { Logger } from "@svc/observability";

interface State {
  failures: number;
  openUntil: number;
}

export class CircuitBreaker {
  private readonly states = new Map<string, State>();
  private stopWatch: (() => void) | undefined;

  constructor(
    private readonly kv: KV,
    private readonly threshold: number,
    private readonly openMs: number,
    private readonly log: Logger,
  ) {}

  static key(origin: string): string {
    return createHash("sha256").update(origin).digest("hex").slice(0, 32);
  }

  async start(): Promise<void> {
    const iterator = await this.kv.watch({ key: ">" });
    this.stopWatch = () => iterator.stop();
    void (async () => {
      for await (const entry of iterator as AsyncIterable<KvWatchEntry>) {
        if (entry.operation !== "PUT") this.states.delete(entry.key);
        else {
          try {
            this.states.set(entry.key, JSON.parse(entry.string()) as State);
          } catch {
            // ignore a malformed entry
          }
        }
      }
    })().catch(() => undefined);
  }

  stop(): void {
    this.stopWatch?.();
  }

  /** Milliseconds until a delivery to this origin may be tried, 0 when it may go now. */
  blockedFor(origin: string): number {
    const state = this.states.get(CircuitBreaker.key(origin));
    if (state === undefined) return 0;
    return Math.max(0, state.openUntil - Date.now());
  }

  async recordSuccess(origin: string): Promise<void> {
    const key = CircuitBreaker.key(origin);
    const state = this.states.get(key);
    if (state === undefined || state.failures === 0) return;
    this.states.set(key, { failures: 0, openUntil: 0 });
    await this.kv.put(key, JSON.stringify({ failures: 0, openUntil: 0 })).catch(() => undefined);
    this.log.info({ origin }, "receiver circuit closed");
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
        if (failures === this.threshold) this.log.warn({ origin }, "receiver circuit opened");
        return;
      } catch {
        // lost a race with another replica: read again
      }
    }
  }
}
