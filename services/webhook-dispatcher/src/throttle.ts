/**
 * A subscription's `throttlePerSecond`: at most that many attempts start in any one second (by the
 * dispatchers' clocks), counted across every dispatcher replica in a NATS KV bucket (memory storage, one
 * key per throttled subscription holding the current second and its count, written with compare-and-set).
 * A delivery over the limit is deferred to the next second without spending an attempt.
 *
 * Within a replica, the admissions of one subscription are made one after another, so compare-and-set
 * conflicts come only from other replicas. While the bucket cannot be reached, each replica counts on its
 * own: the limit then holds per replica (N replicas may start N times the limit), and deliveries go on.
 */
import type { KV } from "@nats-io/kv";
import type { Logger } from "@svc/observability";

export interface ThrottleDecision {
  readonly allowed: boolean;
  /** When refused: how long until the next second, when a slot may be free. */
  readonly retryInMs: number;
}

interface Window {
  second: number;
  count: number;
}

export class Throttle {
  /** The last admission of each subscription under way: the next one waits for it. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Per-replica counts, used while the bucket is out of reach. */
  private readonly local = new Map<string, Window>();
  /** Whether the bucket was out of reach at the last admission (each replica counting alone). */
  private unreachable = false;

  constructor(
    private readonly kv: () => KV,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether one more attempt of `subscriptionId` may start now under `limit` per second. */
  admit(subscriptionId: string, limit: number): Promise<ThrottleDecision> {
    const previous = this.queues.get(subscriptionId) ?? Promise.resolve();
    const decided = previous.then(() => this.decide(subscriptionId, limit));
    const settled = decided.catch(() => undefined);
    this.queues.set(subscriptionId, settled);
    void settled.then(() => {
      if (this.queues.get(subscriptionId) === settled) this.queues.delete(subscriptionId);
    });
    return decided;
  }

  private async decide(subscriptionId: string, limit: number): Promise<ThrottleDecision> {
    const key = `s.${subscriptionId}`;
    for (let conflict = 0; conflict < 20; conflict++) {
      const now = this.now();
      const second = Math.floor(now / 1000);
      try {
        const found = await this.kv().get(key);
        const entry = found !== null && found.operation === "PUT" ? found : null;
        const current = entry === null ? null : (JSON.parse(entry.string()) as Window);
        const used = current !== null && current.second === second ? current.count : 0;
        if (used >= limit) return this.reachable(refusedUntilNextSecond(now));
        const next = JSON.stringify({ second, count: used + 1 } satisfies Window);
        if (entry === null) await this.kv().create(key, next);
        else await this.kv().update(key, next, entry.revision);
        return this.reachable({ allowed: true, retryInMs: 0 });
      } catch (error) {
        if (isConflict(error)) continue;
        return this.locally(subscriptionId, limit, now, error);
      }
    }
    // Another replica won every time: it is busy admitting; look again in the next second.
    return refusedUntilNextSecond(this.now());
  }

  private reachable(decision: ThrottleDecision): ThrottleDecision {
    if (this.unreachable) {
      this.log.info("the webhook throttle bucket is reachable again: limits hold across replicas");
      this.unreachable = false;
      this.local.clear();
    }
    return decision;
  }

  private locally(subscriptionId: string, limit: number, now: number, error: unknown): ThrottleDecision {
    const second = Math.floor(now / 1000);
    if (!this.unreachable) {
      this.unreachable = true;
      this.log.warn(
        { error: (error as Error).message },
        "the webhook throttle bucket is out of reach: each replica counts the limits on its own",
      );
    }
    const window = this.local.get(subscriptionId);
    const used = window !== undefined && window.second === second ? window.count : 0;
    if (used >= limit) return refusedUntilNextSecond(now);
    this.local.set(subscriptionId, { second, count: used + 1 });
    return { allowed: true, retryInMs: 0 };
  }
}

/** Refused at `now`: look again just after its second ends. */
function refusedUntilNextSecond(now: number): ThrottleDecision {
  return { allowed: false, retryInMs: (Math.floor(now / 1000) + 1) * 1000 - now + 5 };
}

/** A compare-and-set that lost: the key changed (or was created) since it was read. */
function isConflict(error: unknown): boolean {
  const message = (error as Error).message ?? "";
  return /wrong last sequence|key exists/i.test(message);
}
