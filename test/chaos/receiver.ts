/**
 * The chaos harness's webhook receiver: records every request, checks the signature, and accepts (200,
 * after a short delay) or, while flapped, answers 503, resets connections, or stops listening altogether.
 * A delivery counts as accepted only when the 200 is written.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";

/** ok: 200; 503: Service Unavailable; reset: the connection is cut unanswered; down: nothing listens. */
export type ReceiverMode = "ok" | "503" | "reset" | "down";

interface Envelope {
  readonly data?: { readonly seq?: unknown; readonly userName?: unknown };
}

/** The user name the outbox load gives its n-th user (its `user.created` event carries it). */
export const chaosUserName = (n: number) => `chaos-u${n}`;

export class ChaosReceiver {
  mode: ReceiverMode = "ok";
  /** Every request that reached the receiver, whatever the answer. */
  requests = 0;
  answered503 = 0;
  resets = 0;
  /** Requests answered 200. */
  accepted = 0;
  badSignatures = 0;
  unparsable = 0;
  /** Accepted deliveries by X-Svc-Delivery: the event's sequence number and how often it came. */
  readonly deliveries = new Map<string, { seq: number; count: number; firstAt: number }>();
  /** Distinct delivery ids accepted per event (more than one: two jobs for one event). */
  readonly deliveryIdsBySeq = new Map<number, Set<string>>();
  /** When each event was first accepted. */
  readonly firstAcceptedAt = new Map<number, number>();
  /** Requests of `user.created` events answered 200 (not in `accepted`). */
  userAccepted = 0;
  /** When each user of the outbox load had its `user.created` event first accepted. */
  readonly userFirstAcceptedAt = new Map<number, number>();
  /** Requests of a flow's http action answered 200 (`x-svc-flow`; not in `accepted`). */
  flowAccepted = 0;
  /** When each event's flow run first reached the receiver. */
  readonly flowFirstAcceptedAt = new Map<number, number>();
  /** Distinct flow step ids (X-Svc-Delivery) accepted per event (more than one: two runs for one event). */
  readonly flowStepIdsBySeq = new Map<number, Set<string>>();
  /** Accepted requests in arrival order (the phases look for the first one after a fault). */
  readonly acceptedLog: Array<{ readonly seq: number; readonly at: number }> = [];
  private readonly server: Server;
  private port = 0;

  constructor(
    private readonly secret: string,
    /** How long the receiver takes to answer 200. */
    private readonly delayMs: number,
  ) {
    this.server = createServer((req, res) => {
      this.requests++;
      if (this.mode === "reset") {
        this.resets++;
        req.socket.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (this.mode !== "ok") {
          this.answered503++;
          res.writeHead(503).end();
          return;
        }
        // A receiver takes a moment: deliveries are in flight when a fault strikes.
        setTimeout(() => this.answer(req.headers, Buffer.concat(chunks), res), this.delayMs);
      });
    });
  }

  /** Accepts (200) and records the delivery, unless the receiver was flapped meanwhile. */
  private answer(headers: IncomingHttpHeaders, body: Buffer, res: ServerResponse) {
    if (res.destroyed || res.socket === null || res.socket.destroyed) return;
    if (this.mode !== "ok") {
      this.answered503++;
      res.writeHead(503).end();
      return;
    }
    const expected = Buffer.from(`sha256=${createHmac("sha256", this.secret).update(body).digest("hex")}`);
    const given = Buffer.from(String(headers["x-svc-signature"] ?? ""));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) this.badSignatures++;
    const deliveryId = String(headers["x-svc-delivery"] ?? "");
    let seq: number;
    let data: Envelope["data"];
    try {
      data = (JSON.parse(body.toString("utf8")) as Envelope).data;
      seq = Number(data?.seq);
    } catch {
      seq = Number.NaN;
    }
    // A user.created of the outbox load: counted apart (its delivery ids are the dispatcher's as well).
    const user = typeof data?.userName === "string" ? /^chaos-u(\d+)$/.exec(data.userName) : null;
    if (user !== null && deliveryId !== "") {
      this.userAccepted++;
      const n = Number(user[1]);
      if (!this.userFirstAcceptedAt.has(n)) this.userFirstAcceptedAt.set(n, Date.now());
      res.writeHead(200).end();
      return;
    }
    if (!Number.isSafeInteger(seq) || deliveryId === "") {
      this.unparsable++;
      res.writeHead(400).end();
      return;
    }
    // A flow's http action (a flow.run job): counted apart from the webhook deliveries.
    if (headers["x-svc-flow"] !== undefined) {
      this.flowAccepted++;
      if (!this.flowFirstAcceptedAt.has(seq)) this.flowFirstAcceptedAt.set(seq, Date.now());
      const steps = this.flowStepIdsBySeq.get(seq) ?? new Set<string>();
      steps.add(deliveryId);
      this.flowStepIdsBySeq.set(seq, steps);
      res.writeHead(200).end();
      return;
    }
    const at = Date.now();
    this.accepted++;
    const seen = this.deliveries.get(deliveryId);
    if (seen) seen.count++;
    else this.deliveries.set(deliveryId, { seq, count: 1, firstAt: at });
    const ids = this.deliveryIdsBySeq.get(seq) ?? new Set<string>();
    ids.add(deliveryId);
    this.deliveryIdsBySeq.set(seq, ids);
    if (!this.firstAcceptedAt.has(seq)) this.firstAcceptedAt.set(seq, at);
    this.acceptedLog.push({ seq, at });
    res.writeHead(200).end();
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async start(): Promise<void> {
    await this.listen(0);
  }

  private listen(port: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, "127.0.0.1", () => {
        this.server.off("error", reject);
        this.port = (this.server.address() as { port: number }).port;
        resolve();
      });
    });
  }

  private close(): Promise<void> {
    if (!this.server.listening) return Promise.resolve();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    return closed;
  }

  async setMode(mode: ReceiverMode): Promise<void> {
    const previous = this.mode;
    this.mode = mode;
    if (mode === "down") await this.close();
    else if (previous === "down") await this.listen(this.port);
    // Kept-alive connections would otherwise go on being used as if nothing happened.
    if (mode === "reset") this.server.closeAllConnections();
  }

  async stop(): Promise<void> {
    await this.close();
  }
}
