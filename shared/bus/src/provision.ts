/**
 * What a service sets up on NATS (the events stream, KV buckets, consumers, the watches on them), set up
 * again after every reconnect. A NATS server restarted without its store, or a memory-backed bucket (the
 * rate limits), comes back empty: without this, what lived there stays missing until every service
 * restarts (sign-in, which fails closed without its bucket, would answer 503 until then).
 *
 * Each step must be idempotent (create-or-bind, restart a watch). After a reconnect the steps run in the
 * order they were added, each retried with backoff until it succeeds or the connection closes.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "@svc/observability";

export type ProvisionStep = () => Promise<void>;

export class Provisioner {
  private readonly steps: Array<{ name: string; run: ProvisionStep }> = [];
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** Completed re-provisionings since start (for tests and logs). */
  rounds = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
  ) {
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === "reconnect") this.schedule();
      }
    })().catch(() => undefined);
  }

  /**
   * Runs `run` now and again after every reconnect. Now, while JetStream cannot answer (a cluster electing
   * a leader after losing a node: requests time out or find no responder), it is tried again for up to
   * `patienceMs`; any other failure, or one that outlasts that, fails the caller, as at start-up.
   */
  async add(name: string, run: ProvisionStep, patienceMs = 30_000): Promise<void> {
    await patiently(name, run, this.log, patienceMs, () => this.nc.isClosed());
    this.afterReconnect(name, run);
  }

  /**
   * Runs `run` after every reconnect only: for a caller whose start-up did the first run its own way
   * (opened a bucket and kept its handle, started a watch on it).
   */
  afterReconnect(name: string, run: ProvisionStep): void {
    this.steps.push({ name, run });
  }

  stop(): void {
    this.stopped = true;
  }

  private schedule() {
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.runAll().finally(() => {
      this.running = undefined;
      if (this.again && !this.stopped) {
        this.again = false;
        this.schedule();
      }
    });
  }

  private async runAll() {
    for (const step of this.steps) {
      for (let attempt = 0; !this.stopped && !this.nc.isClosed(); attempt++) {
        try {
          await step.run();
          break;
        } catch (err) {
          this.log.warn(
            { step: step.name, attempt, error: (err as Error).message },
            "provisioning after a NATS reconnect failed; trying again",
          );
          await new Promise((r) => setTimeout(r, Math.min(200 * 2 ** attempt, 5_000)));
        }
      }
    }
    this.rounds++;
    if (!this.stopped)
      this.log.info({ steps: this.steps.length }, "provisioned again after a NATS reconnect");
  }
}

/** A JetStream request that timed out or found no responder: the cluster may be electing a leader. */
export function isJetStreamAway(error: unknown): boolean {
  const e = error as { name?: string; message?: unknown; cause?: unknown; isNoResponders?: () => boolean };
  if (e?.name === "TimeoutError" || e?.name === "NoRespondersError") return true;
  if (typeof e?.isNoResponders === "function" && e.isNoResponders()) return true;
  if (
    typeof e?.message === "string" &&
    /\b(timeout|no responders|jetstream not (enabled|ready)|temporarily unavailable|insufficient resources)\b/i.test(
      e.message,
    )
  )
    return true;
  return e?.cause !== undefined && e.cause !== error && isJetStreamAway(e.cause);
}

/**
 * Runs `work`, trying again while JetStream cannot answer (`isJetStreamAway`: a cluster electing a leader
 * after losing a node) for up to `patienceMs`; any other failure, or one that outlasts that, is thrown.
 * For what a service opens at start outside the Provisioner (a bucket and its watch).
 */
export async function patiently<T>(
  name: string,
  work: () => Promise<T>,
  log: Logger,
  patienceMs = 30_000,
  givenUp: () => boolean = () => false,
): Promise<T> {
  const deadline = Date.now() + patienceMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!isJetStreamAway(err) || Date.now() > deadline || givenUp()) throw err;
      log.warn(
        { step: name, attempt, error: (err as Error).message },
        "JetStream is not answering yet; trying again",
      );
      await new Promise((r) => setTimeout(r, Math.min(200 * 2 ** attempt, 2_000)));
    }
  }
}
