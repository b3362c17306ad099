/**
 * The NATS service protocol ("micro", ADR-32 of nats-architecture-and-design), so that NATS users' own
 * tooling sees the platform: `nats micro ls`, `nats micro info <service>` and `nats micro stats <service>`
 * list each replica, its endpoints (subject, queue group) and per-endpoint request and error counts and
 * processing times. Written here rather than taken from @nats-io/services: see ADR 0006.
 *
 * Each replica answers, without a queue group, `$SRV.<VERB>`, `$SRV.<VERB>.<name>` and
 * `$SRV.<VERB>.<name>.<id>` for the verbs PING, INFO and STATS.
 */
import { randomUUID } from "node:crypto";

import type { NatsConnection, Subscription } from "@nats-io/transport-node";

const encoder = new TextEncoder();

/** Error reply headers of the protocol, set beside our own Svc-Error-Code. */
export const MicroHeader = {
  Error: "Nats-Service-Error",
  ErrorCode: "Nats-Service-Error-Code",
} as const;

export interface MicroIdentity {
  /** The service's name (letters, digits, `-`, `_`): the platform service, e.g. `rbac`. */
  readonly name: string;
  /** Semantic version of the running build. */
  readonly version: string;
  readonly description?: string;
  readonly metadata?: Readonly<Record<string, string>>;
}

/** Counters of one endpoint, as the STATS verb reports them (times in nanoseconds). */
export class EndpointStats {
  numRequests = 0;
  numErrors = 0;
  lastError = "";
  private processingNs = 0n;

  constructor(
    readonly name: string,
    readonly subject: string,
    readonly queueGroup: string | undefined,
  ) {}

  /** One request handled in `elapsedNs`; `error` when it was answered with an error. */
  record(elapsedNs: bigint, error?: string): void {
    this.numRequests++;
    this.processingNs += elapsedNs;
    if (error !== undefined) {
      this.numErrors++;
      this.lastError = error;
    }
  }

  toJSON() {
    return {
      name: this.name,
      subject: this.subject,
      queue_group: this.queueGroup ?? "",
      num_requests: this.numRequests,
      num_errors: this.numErrors,
      last_error: this.lastError,
      processing_time: Number(this.processingNs),
      average_processing_time:
        this.numRequests === 0 ? 0 : Number(this.processingNs / BigInt(this.numRequests)),
    };
  }
}

/** One replica's registration: its endpoints and the protocol's discovery subjects. */
export class MicroService {
  /** This replica's id: unique, and one subject token. */
  readonly id = randomUUID().replaceAll("-", "");
  private readonly started = new Date().toISOString();
  private readonly endpoints: EndpointStats[] = [];
  private readonly subscriptions: Subscription[] = [];

  constructor(
    private readonly nc: NatsConnection,
    private readonly identity: MicroIdentity,
  ) {}

  /** Declares an endpoint; the caller records each request it handles on the returned stats. */
  addEndpoint(name: string, subject: string, queueGroup: string | undefined): EndpointStats {
    const stats = new EndpointStats(name, subject, queueGroup);
    this.endpoints.push(stats);
    return stats;
  }

  /** Answers PING, INFO and STATS. */
  start(): void {
    const { name } = this.identity;
    for (const verb of ["PING", "INFO", "STATS"] as const) {
      for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${name}`, `$SRV.${verb}.${name}.${this.id}`]) {
        this.subscriptions.push(
          this.nc.subscribe(subject, {
            callback: (err, msg) => {
              if (err === null && msg.reply) msg.respond(encoder.encode(JSON.stringify(this.answer(verb))));
            },
          }),
        );
      }
    }
  }

  /** Stops answering discovery (the endpoints' own subscriptions are the bus's). */
  stop(): void {
    for (const sub of this.subscriptions.splice(0)) sub.unsubscribe();
  }

  private answer(verb: "PING" | "INFO" | "STATS") {
    const { name, version, description = "", metadata = {} } = this.identity;
    const base = { name, id: this.id, version, metadata };
    switch (verb) {
      case "PING":
        return { type: "io.nats.micro.v1.ping_response", ...base };
      case "INFO":
        return {
          type: "io.nats.micro.v1.info_response",
          ...base,
          description,
          endpoints: this.endpoints.map((e) => ({
            name: e.name,
            subject: e.subject,
            queue_group: e.queueGroup ?? "",
            metadata: null,
          })),
        };
      case "STATS":
        return {
          type: "io.nats.micro.v1.stats_response",
          ...base,
          started: this.started,
          endpoints: this.endpoints.map((e) => e.toJSON()),
        };
    }
  }
}
