/**
 * Steady load: events published straight onto JetStream through the project's publisher, at a fixed rate,
 * each with its own event id and a sequence number in its data. A publish that fails (NATS down, no
 * JetStream yet) is retried with the same event id (the stream's duplicate window drops a repeat); an
 * event counts as published once JetStream acknowledged it.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import type { EventPublisher } from "@svc/bus";

// Published as a flow would publish it: flow.<name> events belong to no plugin and need none installed.
export const CHAOS_EVENT = "flow.chaos-tick";

export interface ChaosEvent {
  readonly seq: number;
  readonly eventId: string;
  /** When the harness first tried to publish it. */
  readonly createdAt: number;
  /** When JetStream acknowledged it; undefined while it is not (or never was). */
  ackedAt: number | undefined;
  attempts: number;
  /** JetStream said it had the event already (an earlier try was stored, its ack lost). */
  duplicateAck: boolean;
}

export class SteadyLoad {
  readonly events: ChaosEvent[] = [];
  publishErrors = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private giveUpAt = Number.POSITIVE_INFINITY;

  constructor(
    private readonly publisher: EventPublisher,
    private readonly ratePerSecond: number,
    private readonly workspaceKey: string,
    private readonly runId: string,
  ) {}

  /** Creates events at the rate (ticks of 20 ms, catching up on timer lag) until stop(). */
  start(): void {
    const t0 = Date.now();
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - t0) / 1000) * this.ratePerSecond);
      while (this.events.length < due) this.publish(this.create());
    }, 20);
  }

  private create(): ChaosEvent {
    const event: ChaosEvent = {
      seq: this.events.length,
      eventId: randomUUID(),
      createdAt: Date.now(),
      ackedAt: undefined,
      attempts: 0,
      duplicateAck: false,
    };
    this.events.push(event);
    return event;
  }

  private publish(e: ChaosEvent): void {
    const task = (async () => {
      for (;;) {
        e.attempts++;
        try {
          const ack = await this.publisher.publish(
            CHAOS_EVENT,
            this.workspaceKey,
            { seq: e.seq, eventId: e.eventId, run: this.runId },
            { eventId: e.eventId, occurredAt: new Date(e.createdAt) },
          );
          e.ackedAt = Date.now();
          e.duplicateAck = ack.duplicate;
          return;
        } catch {
          this.publishErrors++;
          if (Date.now() >= this.giveUpAt) return;
          await sleep(250);
        }
      }
    })();
    this.inFlight.add(task);
    void task.finally(() => this.inFlight.delete(task));
  }

  /** Events not yet acknowledged are being retried. */
  get pending(): number {
    return this.inFlight.size;
  }

  /** Stops creating events; publishes still unacknowledged after `graceMs` are given up. */
  async stop(graceMs: number): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.giveUpAt = Date.now() + graceMs;
    await Promise.all([...this.inFlight]);
  }
}

/**
 * Load through rbac's transactional outbox: users created through the gateway's
 * operator API at a fixed rate, each with an Idempotency-Key; their `user.created` events are recorded in
 * the transaction of the change and relayed by rbac. A request whose outcome is unknown (the gateway or
 * rbac killed, NATS down, a 5xx) is sent again with the same key; a 201 (first or replayed) counts as
 * created, and then its event must reach the receiver. A 409 "taken" means a retry ran again although an
 * earlier try committed: rbac keeps a keyed write's answer with its change, so none is expected; such a
 * user counts as created too, and as a finding.
 */
export interface ChaosUser {
  readonly n: number;
  readonly createdAt: number;
  committedAt: number | undefined;
  attempts: number;
}

export class OutboxLoad {
  readonly users: ChaosUser[] = [];
  requestErrors = 0;
  /** Retries answered 409 "taken" instead of the kept 201 (a keyed write that ran twice). */
  takenOnRetry = 0;
  /** The answers that were sent again, by status (0: no answer). */
  readonly retriedStatuses = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private giveUpAt = Number.POSITIVE_INFINITY;

  constructor(
    private readonly gateway: () => string,
    private readonly token: () => string,
    private readonly ratePerSecond: number,
    private readonly userName: (n: number) => string,
  ) {}

  start(): void {
    const t0 = Date.now();
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - t0) / 1000) * this.ratePerSecond);
      while (this.users.length < due) this.create();
    }, 20);
  }

  private create(): void {
    const user: ChaosUser = {
      n: this.users.length,
      createdAt: Date.now(),
      committedAt: undefined,
      attempts: 0,
    };
    this.users.push(user);
    const task = (async () => {
      for (;;) {
        user.attempts++;
        try {
          const response = await fetch(`${this.gateway()}/api/users`, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              authorization: `Bearer ${this.token()}`,
              "idempotency-key": `chaos-user-${user.n}`,
            },
            body: JSON.stringify({ userName: this.userName(user.n), password: "a long chaos password" }),
            // Longer than the gateway's own request timeout: an answer is awaited, not abandoned.
            signal: AbortSignal.timeout(40_000),
          });
          const text = await response.text();
          // 409 "taken": an earlier try committed and its kept answer was not replayed; 409 "still being
          // processed" is an earlier try under way: ask again.
          if (response.status === 201 || (response.status === 409 && /is taken/.test(text))) {
            if (response.status === 409) this.takenOnRetry++;
            user.committedAt = Date.now();
            return;
          }
          this.requestErrors++;
          this.retriedStatuses.set(response.status, (this.retriedStatuses.get(response.status) ?? 0) + 1);
        } catch {
          this.requestErrors++;
          this.retriedStatuses.set(0, (this.retriedStatuses.get(0) ?? 0) + 1);
        }
        if (Date.now() >= this.giveUpAt) return;
        // Backing off as a client should (up to 5 s, with jitter): a backlog of users created during an
        // outage must not retry the platform into the ground when it returns.
        await sleep(Math.min(5_000, 250 * 2 ** Math.min(user.attempts, 5)) * (0.5 + Math.random() / 2));
      }
    })();
    this.inFlight.add(task);
    void task.finally(() => this.inFlight.delete(task));
  }

  async stop(graceMs: number): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.giveUpAt = Date.now() + graceMs;
    await Promise.all([...this.inFlight]);
  }
}
