import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureBucket, KvWatches } from "@svc/bus";

/** The bucket holding revoked session ids; every gateway replica watches it. */
export function revocationBucketName(prefix: string): string {
  return `${prefix}_revoked_sessions`;
}

/**
 * The key rbac writes once the bucket holds every revoked session that has not expired:
 * after the bucket was made again empty (NATS lost its store), no gateway trusts a token until rbac has
 * filled it from `rbac.sessions` again. Its value is when that was done (epoch ms); rbac writes it again
 * well within the bucket's entry lifetime.
 */
export const REVOCATIONS_COMPLETE_KEY = "svc.complete";

export async function openRevocationBucket(
  nc: NatsConnection,
  prefix: string,
  maxTokenLifetimeMs: number,
  replicas: number,
): Promise<KV> {
  // Entries outlive the longest token, after which a revoked token is expired anyway.
  return ensureBucket(nc, revocationBucketName(prefix), {
    history: 1,
    ttl: maxTokenLifetimeMs + 60_000,
    replicas,
  });
}

/**
 * A replica's view of revoked sessions, kept current by a KV watch: a revocation written by rbac reaches
 * every gateway in milliseconds (the issue asks for within one second). `ready` turns true only once the
 * watch has delivered every entry the bucket held when it started and the bucket says it is complete (rbac
 * wrote REVOCATIONS_COMPLETE_KEY after filling it); until then the guard answers 503 rather than trust a
 * token. Each entry's value is the session's expiry (epoch ms): expired entries are pruned
 * locally, since a bucket's age-based expiry sends watchers no event.
 */
export class RevocationList {
  private readonly revoked = new Map<string, number>();
  ready = false;
  private readonly watches = new KvWatches();
  private pruneTimer: NodeJS.Timeout | undefined;
  /** Ends the wait of a start still waiting for its watch (a later start or a stop came first). */
  private endWait: () => void = () => undefined;

  /**
   * Watches the bucket again (after a NATS reconnect, the bucket provisioned anew). What is known stays
   * known meanwhile, and `ready` stays as it was.
   */
  async restart(kv: KV): Promise<void> {
    await this.start(kv);
  }

  /**
   * Follows the bucket; returns once the watch has delivered what the bucket held, or at once when the
   * list is stopped or started again meanwhile (that start's watch is then stopped as it arrives).
   */
  async start(kv: KV): Promise<void> {
    this.stopFollowing();
    const follow = this.watches.renew();
    let ended = false;
    const superseded = new Promise<void>((resolve) => {
      this.endWait = () => {
        ended = true;
        resolve();
      };
    });
    const status = await kv.status();
    let caughtUp = false;
    let complete = false;
    let resolveLoaded: () => void = () => undefined;
    const loaded = new Promise<void>((resolve) => {
      resolveLoaded = resolve;
    });
    const settle = () => {
      if (!caughtUp) return;
      resolveLoaded();
      if (complete) this.ready = true;
    };
    if (status.values === 0) caughtUp = true;
    await follow(kv, ">", (entry) => {
      if (entry.key === REVOCATIONS_COMPLETE_KEY) complete ||= entry.operation === "PUT";
      else if (entry.operation === "PUT")
        this.revoked.set(entry.key, Number(entry.string()) || Number.MAX_SAFE_INTEGER);
      else this.revoked.delete(entry.key);
      if (entry.delta === 0) caughtUp = true;
      settle();
    });
    settle();
    // What the bucket held is loaded before the caller goes on; `ready` waits for rbac's mark as well.
    await Promise.race([loaded, superseded]);
    if (ended) return;
    this.pruneTimer = setInterval(() => {
      const now = Date.now();
      for (const [sid, expiresAt] of this.revoked) if (expiresAt < now) this.revoked.delete(sid);
    }, 60_000);
    this.pruneTimer.unref();
  }

  isRevoked(sessionId: string): boolean {
    return this.revoked.has(sessionId);
  }

  stop(): void {
    this.stopFollowing();
  }

  private stopFollowing(): void {
    this.endWait();
    this.watches.stop();
    clearInterval(this.pruneTimer);
    this.pruneTimer = undefined;
  }
}
