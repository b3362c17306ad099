/**
 * Fixed-window rate limits per client, counted across every gateway replica in a NATS KV bucket
 * (memory storage; entries expire after two windows). Key: `<policy>.<minute>.<client digest>`.
 *
 * - `auth` (login, 5/min by default) counts exactly: each attempt is a compare-and-set increment of the
 *   shared counter before the request proceeds. When the bucket cannot be reached, login fails closed.
 * - `api` (600/min) counts locally first: a request is admitted when the shared total last seen plus
 *   this replica's not-yet-written hits stay under the limit. Hits are written with compare-and-set every
 *   100 ms, and every replica watches the current window's keys, so each sees the others' counts within a
 *   sync interval. Across N replicas a client can overshoot by at most what N replicas admit in 100 ms
 *   before they see each other; the hot path never waits on the network. When the bucket is unreachable
 *   the api policy keeps counting per replica (fails open), so an outage of NATS KV does not stop the API.
 *
 * Every decision says what is left and when the window resets, for the `RateLimit-Policy` and `RateLimit`
 * headers of the answer (`rateLimitHeaders`); for `api` across replicas that count is approximate.
 */
import { createHash } from "node:crypto";

import type { KV } from "@nats-io/kv";
import { KvWatches } from "@svc/bus";
import type { Logger } from "@svc/observability";
import { growingLru } from "@svc/runtime";
import ipaddr from "ipaddr.js";

/** `account`: sign-in attempts per account, counted exactly as `auth` is. */
export type Policy = "auth" | "api" | "account";

const WINDOW_MS = 60_000;
const SYNC_MS = 100;

interface Counter {
  /** Shared total last seen (written by all replicas, this one included). */
  shared: number;
  /** Hits this replica admitted and has not written yet. */
  pending: number;
  /**
   * Hits being written now, counted until the write returns the new shared total (so they never drop out
   * of the count meanwhile; the watch may show them a moment earlier, which counts them twice for that
   * moment and errs on the strict side).
   */
  writing: number;
}

export interface LimitDecision {
  readonly allowed: boolean;
  /** The policy's requests per window; 0 when the limit is off (no headers are sent then). */
  readonly limit: number;
  /** Requests left in the current window after this one (0 when refused). */
  readonly remaining: number;
  /** Seconds until the current window ends and the count starts again. */
  readonly resetSeconds: number;
}

const OFF: LimitDecision = { allowed: true, limit: 0, remaining: 0, resetSeconds: 0 };

function decision(allowed: boolean, limit: number, used: number, now: number): LimitDecision {
  return {
    allowed,
    limit,
    remaining: Math.max(0, limit - used),
    resetSeconds: Math.max(1, Math.ceil(((windowOf(now) + 1) * WINDOW_MS - now) / 1000)),
  };
}

/**
 * The answer's rate-limit header fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` names
 * the policy with its quota `q` and window `w` (seconds); `RateLimit` says what is left, `r`, and when the
 * window resets, `t` (seconds). None while the limit is off.
 */
export function rateLimitHeaders(policy: Policy, d: LimitDecision): Record<string, string> {
  if (d.limit === 0) return {};
  return {
    "ratelimit-policy": `"${policy}";q=${d.limit};w=${WINDOW_MS / 1000}`,
    ratelimit: `"${policy}";r=${d.remaining};t=${d.resetSeconds}`,
  };
}

function windowOf(now: number): number {
  return Math.floor(now / WINDOW_MS);
}

/** Recent clients' digests: hashing the client at every request took about 3 % of an operator GET's CPU. */
const digests = growingLru<string, string>(10_000);

function clientDigest(client: string): string {
  let digest = digests.get(client);
  if (digest === undefined) {
    digest = createHash("sha256").update(client).digest("base64url").slice(0, 22).replaceAll("-", "_");
    digests.set(client, digest);
  }
  return digest;
}

/** The shared counter's key of one client in one window (`window`: minutes since the epoch). */
export function rateLimitKey(policy: Policy, window: number, client: string): string {
  return `${policy}.${window}.${clientDigest(client)}`;
}

export class RateLimiter {
  private readonly counters = new Map<string, Counter>();
  private window = windowOf(Date.now());
  private syncTimer: NodeJS.Timeout | undefined;
  private readonly watches = new KvWatches();
  private syncing = false;

  constructor(
    private readonly kv: KV,
    /** Read at each request (the gateway passes getters over the run-time settings). */
    private readonly limits: Readonly<Record<Policy, number>>,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.watchWindow(this.window);
    this.syncTimer = setInterval(() => void this.sync(), SYNC_MS);
    this.syncTimer.unref();
  }
  stop(): void {
    clearInterval(this.syncTimer);
    this.watches.stop();
  }

  /** Watches the current window again (after a NATS reconnect, the bucket provisioned anew). */
  async restartWatch(): Promise<void> {
    await this.watchWindow(this.window);
  }

  private key(policy: Policy, window: number, client: string): string {
    return rateLimitKey(policy, window, client);
  }

  private async watchWindow(window: number) {
    // A watch still being made for the window before, or for a stopped limiter, is stopped as it arrives.
    const follow = this.watches.renew();
    try {
      await follow(this.kv, `api.${window}.>`, (entry) => {
        if (entry.operation !== "PUT") return;
        const counter = this.counters.get(entry.key) ?? { shared: 0, pending: 0, writing: 0 };
        counter.shared = Math.max(counter.shared, Number(entry.string()) || 0);
        this.counters.set(entry.key, counter);
      });
    } catch (err) {
      this.log.warn({ error: (err as Error).message }, "rate-limit watch failed; counting per replica");
    }
  }

  /** Rolls the window over: the previous minute's counters are dropped. */
  private roll(now: number) {
    const window = windowOf(now);
    if (window === this.window) return;
    this.window = window;
    this.counters.clear();
    void this.watchWindow(window);
  }

  /** The api policy: admitted or not, without waiting on the network. */
  hit(policy: "api", client: string): LimitDecision {
    const limit = this.limits[policy];
    if (limit === 0) return OFF;
    const now = Date.now();
    this.roll(now);
    const key = this.key(policy, this.window, client);
    let counter = this.counters.get(key);
    if (counter === undefined) {
      counter = { shared: 0, pending: 0, writing: 0 };
      this.counters.set(key, counter);
    }
    const used = counter.shared + counter.writing + counter.pending;
    if (used >= limit) return decision(false, limit, limit, now);
    counter.pending++;
    return decision(true, limit, used + 1, now);
  }

  /** Writes pending hits to the shared counters. */
  private async sync() {
    if (this.syncing) return;
    this.syncing = true;
    try {
      for (const [key, counter] of this.counters) {
        if (counter.pending === 0) continue;
        const add = counter.pending;
        counter.pending = 0;
        counter.writing += add;
        try {
          const total = await this.addShared(key, add);
          // The watch may have delivered a later total meanwhile.
          counter.shared = Math.max(counter.shared, total);
        } catch {
          counter.pending += add; // try again next round; meanwhile keep counting locally
        } finally {
          counter.writing -= add;
        }
      }
    } finally {
      this.syncing = false;
    }
  }

  /** Compare-and-set increment; returns the new shared total. */
  private async addShared(key: string, add: number): Promise<number> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const entry = await this.kv.get(key);
      if (entry === null || entry.operation !== "PUT") {
        try {
          await this.kv.create(key, String(add));
          return add;
        } catch {
          continue; // created by another replica meanwhile
        }
      }
      const total = (Number(entry.string()) || 0) + add;
      try {
        await this.kv.update(key, String(total), entry.revision);
        return total;
      } catch {
        // another replica wrote first: read again
      }
    }
    throw new Error("rate-limit counter contended");
  }

  /**
   * The auth policy: counts exactly across replicas before admitting. Throws when the shared store is
   * unreachable (login fails closed).
   */
  async hitExact(policy: "auth" | "account", client: string): Promise<LimitDecision> {
    const limit = this.limits[policy];
    if (limit === 0) return OFF;
    const now = Date.now();
    const key = this.key(policy, windowOf(now), client);
    for (let attempt = 0; attempt < 10; attempt++) {
      const entry = await this.kv.get(key);
      const current = entry === null || entry.operation !== "PUT" ? 0 : Number(entry.string()) || 0;
      if (current >= limit) return decision(false, limit, limit, now);
      try {
        if (entry === null || entry.operation !== "PUT") await this.kv.create(key, "1");
        else await this.kv.update(key, String(current + 1), entry.revision);
        return decision(true, limit, current + 1, now);
      } catch {
        // lost a race with another attempt: read again
      }
    }
    throw new Error("rate-limit counter contended");
  }
}

/** Trusted proxies as parsed CIDR ranges. */
export type ProxyList = Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;

export function parseTrustedProxies(entries: readonly string[]): ProxyList {
  return entries.map((entry) => {
    if (entry.includes("/")) return ipaddr.parseCIDR(entry);
    const address = ipaddr.parse(entry);
    return [address, address.kind() === "ipv4" ? 32 : 128];
  });
}

/** An address as parsed, IPv4-mapped IPv6 as IPv4; null when it is none. */
export function normaliseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  try {
    const parsed = ipaddr.parse(address.trim());
    return parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()
      ? (parsed as ipaddr.IPv6).toIPv4Address()
      : parsed;
  } catch {
    return null;
  }
}

/**
 * What a limit counts against for a client address: an IPv4 address itself, an IPv6 address's /64 (one
 * subscriber's network holds 2^64 addresses, so counting each would let one client pick fresh buckets at
 * will). Anything unparsable counts as itself.
 */
export function limitGroup(client: string): string {
  const ip = normaliseAddress(client);
  if (ip === null || ip.kind() === "ipv4") return client;
  const parts = (ip as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16));
  return `${parts.join(":")}::/64`;
}

/** Whether `ip` is one of the trusted proxies. */
export function isTrustedProxy(ip: ipaddr.IPv4 | ipaddr.IPv6, trusted: ProxyList): boolean {
  return trusted.some(([range, bits]) => ip.kind() === range.kind() && ip.match(range, bits));
}

/**
 * The client a limit counts against: from a trusted proxy, the X-Forwarded-For address the
 * proxies vouch for; otherwise the connection's own address (from anyone else the header is ignored).
 *
 * The spec names the first X-Forwarded-For address. A client can put any addresses at the front of the
 * header and proxies append to it, so the list is read from the right, skipping trusted proxies: the
 * first address that is not a trusted proxy is the client. For a chain built by trusted proxies that is
 * the first address, as the spec says; a forged prefix cannot pick a fresh rate-limit bucket.
 */
export function clientAddress(remote: string, forwardedFor: string | undefined, trusted: ProxyList): string {
  const peer = normaliseAddress(remote);
  if (peer === null) return remote;
  if (forwardedFor === undefined || !isTrustedProxy(peer, trusted)) return peer.toString();
  const hops = forwardedFor.split(",").map((h) => normaliseAddress(h));
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i];
    if (hop === null || hop === undefined) break; // an unparsable entry: stop at the last good one
    client = hop;
    if (!isTrustedProxy(hop, trusted)) break;
  }
  return client.toString();
}
