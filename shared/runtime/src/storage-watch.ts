/**
 * Whether what a service keeps in NATS has the copies it should (BackendHost:NatsReplicas): every 15 s
 * each stream, bucket and object store the service uses is read, and a shortfall (a node down, a peer
 * still catching up) is reported by `svc_nats_stream_replicas{stream,state}` and in `/ready`'s body
 * (`storage`). It does not make the replica unready: a cluster that lost one node serves on, and every
 * replica of every service going unready at once would turn a degraded cluster into an outage.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { Gauge, type Registry } from "@svc/observability";

export interface StorageCopies {
  readonly stream: string;
  readonly configured: number;
  /** The leader and the followers that are current; 0 while the stream has no leader. */
  readonly current: number;
}

export class StorageWatch {
  private last: readonly StorageCopies[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    /** The JetStream streams the service uses (`KV_<bucket>`, `OBJ_<store>`, the events stream). */
    private readonly streams: readonly string[],
    metrics: Registry,
    private readonly intervalMs = 15_000,
  ) {
    const readings = () => this.last;
    new Gauge({
      name: "svc_nats_stream_replicas",
      help: "Copies of each stream, bucket and object store this service uses: configured, and current (in sync).",
      labelNames: ["stream", "state"] as const,
      registers: [metrics],
      collect() {
        this.reset();
        for (const s of readings()) {
          this.labels(s.stream, "configured").set(s.configured);
          this.labels(s.stream, "current").set(s.current);
        }
      },
    });
  }

  start(): void {
    void this.check();
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Reads every stream's copies now. */
  async check(): Promise<readonly StorageCopies[]> {
    try {
      const jsm = await jetstreamManager(this.nc);
      const found: StorageCopies[] = [];
      for (const stream of this.streams) {
        const info = await jsm.streams.info(stream).catch(() => undefined);
        if (info === undefined) continue;
        const cluster = info.cluster;
        // A single server reports no cluster: its one copy is the leader.
        const current =
          cluster === undefined
            ? 1
            : cluster.leader === undefined
              ? 0
              : 1 + (cluster.replicas ?? []).filter((r) => r.current).length;
        found.push({ stream, configured: info.config.num_replicas, current });
      }
      this.last = found;
    } catch {
      // JetStream away: the last reading stands, /ready says NATS is down anyway.
    }
    return this.last;
  }

  /** What `/ready` adds to its body. */
  report(): { status: "ok" | "degraded"; short: StorageCopies[] } {
    const short = this.last.filter((s) => s.current < s.configured);
    return { status: short.length === 0 ? "ok" : "degraded", short };
  }
}
