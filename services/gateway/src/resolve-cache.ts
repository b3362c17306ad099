import type { Bus } from "@svc/bus";
import { type BroadcastContract, onBroadcast } from "@svc/contracts";
import { ErrorCode, SvcError } from "@svc/errors";
import { growingLru } from "@svc/runtime";
import type { LRUCache } from "lru-cache";

/** The upstream is away (not: it answered with an error). */
function isOutage(error: unknown): boolean {
  return (
    error instanceof SvcError &&
    (error.code === ErrorCode.ServiceUnavailable || error.code === ErrorCode.Timeout)
  );
}

/**
 * Cached workspace resolutions, keyed by normalised host and path, holding the resolver's reply bytes as
 * they are sent to the client.
 *
 * Coherence: every entry lives at most `ttlMs`; on a `resolver.cache.invalidate` broadcast the whole cache
 * is dropped and the generation advances. A lookup that started before an invalidation does not store its
 * (possibly stale) answer. Concurrent misses for one key share a single upstream request.
 *
 * Outages: an entry is kept `staleMs` past its lifetime; when the upstream cannot answer (the resolver or
 * NATS is away), a lookup whose entry is past its lifetime but within that window is answered from it,
 * so public routes keep serving the last known resolution for a bounded time.
 */
export class ResolveCache {
  private readonly entries: LRUCache<string, { value: Uint8Array; freshUntil: number }> | undefined;
  private readonly pending = new Map<string, Promise<Uint8Array>>();
  private generation = 0;
  hits = 0;
  misses = 0;

  staleServed = 0;

  constructor(
    private readonly ttlMs: number,
    maxEntries: number,
    private readonly staleMs = 0,
  ) {
    this.entries =
      ttlMs > 0 ? growingLru(maxEntries, { ttl: ttlMs + staleMs, ttlAutopurge: false }) : undefined;
  }

  get(key: string): Uint8Array | undefined {
    const entry = this.entries?.get(key);
    if (entry === undefined || entry.freshUntil < Date.now()) return undefined;
    this.hits++;
    return entry.value;
  }

  /**
   * Answers from the cache or runs `load` once for all concurrent callers of the same key. With the cache
   * off (TTL 0) every call runs `load`: nothing is shared, not even concurrent misses. `freshFor` may
   * shorten how long one answer stays fresh (never lengthen it past the TTL).
   */
  load(
    key: string,
    load: () => Promise<Uint8Array>,
    freshFor?: (value: Uint8Array) => number,
  ): Promise<Uint8Array> {
    if (this.entries === undefined) {
      this.misses++;
      return load();
    }
    const cached = this.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    const inFlight = this.pending.get(key);
    if (inFlight !== undefined) return inFlight;
    this.misses++;
    const generation = this.generation;
    const promise = load().then(
      (value) => {
        this.pending.delete(key);
        if (generation === this.generation) {
          const ttl = Math.min(this.ttlMs, freshFor?.(value) ?? this.ttlMs);
          this.entries?.set(key, { value, freshUntil: Date.now() + ttl });
        }
        return value;
      },
      (error: unknown) => {
        this.pending.delete(key);
        const stale = this.staleMs > 0 && isOutage(error) ? this.entries?.get(key) : undefined;
        if (stale !== undefined) {
          this.staleServed++;
          return stale.value;
        }
        throw error;
      },
    );
    this.pending.set(key, promise);
    return promise;
  }

  invalidate(): void {
    this.generation++;
    this.entries?.clear();
    // Waiters keep their answer; it is just not stored.
    this.pending.clear();
  }

  get size(): number {
    return this.entries?.size ?? 0;
  }
}

/**
 * A cache kept coherent with its sources: dropped whole on each of `broadcasts` and after every NATS
 * reconnect (invalidations broadcast while the connection was down were missed, so nothing cached before
 * it is trusted). Every public cache of the gateway is made here.
 */
/** How long answers are fresh, how many are kept, and how long one may serve stale while its owner is away. */
export interface CacheLimits {
  readonly ttlMs: number;
  readonly size: number;
  readonly staleMs?: number;
}

export function followedCache(
  bus: Bus,
  broadcasts: readonly BroadcastContract[],
  options: CacheLimits,
): ResolveCache {
  const cache = new ResolveCache(options.ttlMs, options.size, options.staleMs ?? 0);
  for (const broadcast of broadcasts) onBroadcast(bus, broadcast, () => cache.invalidate());
  void (async () => {
    for await (const status of bus.nc.status()) if (status.type === "reconnect") cache.invalidate();
  })().catch(() => undefined);
  return cache;
}
