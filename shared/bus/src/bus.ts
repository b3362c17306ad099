import {
  errors as natsErrors,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import {
  ErrorCode,
  fromUnexpected,
  fromWire,
  InternalError,
  runWithDeadline,
  ServiceUnavailableError,
  SvcError,
  TimeoutError,
} from "@svc/errors";
import {
  type Context,
  extractContext,
  failed,
  injectSpan,
  type Logger,
  Observers,
  type Span,
  SpanKind,
  startSpan,
  tracingEnabled,
  withSpan,
} from "@svc/observability";
import { Header, type Principal, type RouteReply } from "@svc/wire-contract";

import { isNatsConnected, trackConnection } from "./connect.js";
import { type EndpointStats, MicroHeader, MicroService } from "./micro.js";
import { ownerOf } from "./subjects.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A message's headers as the trace context's carrier. */
export const headerReader = (msg: { readonly headers?: MsgHdrs | undefined }) => ({
  get: (name: string) => msg.headers?.get(name) || undefined,
});

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

export interface RequestOptions {
  /** Overrides the default timeout. The deadline sent is now + timeout, unless `deadline` is given. */
  readonly timeoutMs?: number;
  /** Absolute deadline (epoch ms) inherited from an upstream request. */
  readonly deadline?: number;
  readonly requestId?: string;
  /** Further headers to send (names from `Header`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** What a handler knows about the request besides its payload. */
export interface HandlerContext {
  readonly subject: string;
  readonly requestId: string | undefined;
  /** A header of the request, or undefined. */
  readonly header: (name: string) => string | undefined;
  /** Epoch ms after which the caller has given up. */
  readonly deadline: number;
  readonly log: Logger;
}

/** A handler of requests of type `Req` answering `Rep`. */
export type Handler<Req, Rep> = (request: Req, context: HandlerContext) => Promise<Rep> | Rep;

/** How a subject is served, for a handler of requests of type `Req`. */
export interface ServeOptions<Req> {
  /** Queue group; defaults to the bus's service name so replicas share the load. */
  readonly queue?: string;
  /** Every replica answers (no queue group), for scatter-gather requests (`requestAll`). */
  readonly fanOut?: boolean;
  /** Checks and narrows the decoded payload (a contract's `decode`); throws a ValidationError to reject it. */
  readonly decode: (payload: unknown) => Req;
}

export interface BusOptions {
  readonly nc: NatsConnection;
  /** First subject token of this deployment (`svc`). */
  readonly prefix: string;
  /** This service's name, the default queue group. */
  readonly service: string;
  readonly logger: Logger;
  readonly defaultTimeoutMs: number;
  /**
   * Registers this replica with the NATS service protocol (`nats micro ls/info/stats`) under the service's
   * name, with every served subject as an endpoint. Off when absent (clients that only send).
   */
  readonly micro?: { readonly version: string; readonly description?: string };
  /** Signs the principal of the operator route requests this bus sends (the gateway's). */
  readonly principalSigner?: PrincipalSigner;
  /** Verifies the principal of the operator route requests this bus serves (every service's). */
  readonly principalVerifier?: PrincipalVerifier;
  /** Keeps the outcomes of keyed writes (services that own operator write routes). */
  readonly keyedWrites?: KeyedWrites;
}

/**
 * The principal of an operator route request, signed by the service that established it (the gateway) and
 * verified by the one that acts on it: implemented in @svc/runtime.
 */
export interface PrincipalSigner {
  /** A signed assertion of `principal`, sent in the `Svc-Principal` header. */
  sign(principal: Principal): Promise<string>;
}
export interface PrincipalVerifier {
  /**
   * The principal `assertion` (the `Svc-Principal` header) asserts, when it is valid and asserts exactly
   * `claimed` (the body's); throws a 401 SvcError otherwise.
   */
  verify(assertion: string | undefined, claimed: Principal): Promise<Principal>;
}

/**
 * Keeps the outcome of the operator route requests sent with an `Idempotency-Key`:
 * implemented in @svc/runtime over the service's database.
 */
export interface KeyedWrites {
  /**
   * Runs `work` once per `key`: the first request's answer (or 4xx error) is kept with the change it made
   * and given again to every later request with the key; another request (`fingerprint`) under a used
   * key is a 422.
   */
  run<T>(
    key: string,
    fingerprint: string,
    work: () => Promise<T>,
    options?: {
      /** The answer shows a secret once: keep its status and location, not its body (see RouteSpec). */
      readonly withholdReply?: boolean;
    },
  ): Promise<T>;
}

/**
 * What an idempotency store keeps of a reply that shows a secret once (a route's `secretReply`): its
 * status and location, never its body. A keyed retry of it is answered 409 (`SecretShownOnceError`).
 */
export interface WithheldReply {
  readonly withheld: true;
  readonly status: number;
  readonly headers?: { readonly location: string };
}

export function withheldReply(reply: RouteReply): WithheldReply {
  const location = reply.headers?.location;
  return {
    withheld: true,
    status: reply.status,
    ...(location === undefined ? {} : { headers: { location } }),
  };
}

/**
 * Typed request/reply and broadcast over NATS. Errors cross the wire in exactly one way: an error reply
 * carries the `Svc-Error-Code` header and a problem body, and the caller turns it back into the same
 * SvcError. NATS failures become 503 (no responder, connection gone) or 504 (deadline passed).
 */
export class Bus {
  readonly nc: NatsConnection;
  readonly prefix: string;
  readonly service: string;
  private readonly log: Logger;
  private readonly defaultTimeoutMs: number;
  private readonly subscriptions: Subscription[] = [];
  /** Signs the principal of the operator route requests this bus sends (the gateway's bus only). */
  readonly principalSigner: PrincipalSigner | undefined;
  /** Verifies the principal of the operator route requests this bus serves (every service's). */
  readonly principalVerifier: PrincipalVerifier | undefined;
  /** Keeps the outcomes of keyed writes (every service that owns operator write routes). */
  readonly keyedWrites: KeyedWrites | undefined;
  /**
   * Told of every request this bus sends (the diagnostics recorder adds one while it records): subject,
   * duration, outcome (`ok` or the error code) and the reply's size. An observer must not block.
   */
  readonly requests = new Observers<
    [subject: string, durationMs: number, outcome: string, replyBytes: number]
  >();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** This replica's registration with the NATS service protocol, when enabled. */
  readonly micro: MicroService | undefined;

  constructor(options: BusOptions) {
    this.nc = options.nc;
    this.prefix = options.prefix;
    this.service = options.service;
    this.log = options.logger;
    this.defaultTimeoutMs = options.defaultTimeoutMs;
    this.principalSigner = options.principalSigner;
    this.principalVerifier = options.principalVerifier;
    this.keyedWrites = options.keyedWrites;
    trackConnection(this.nc);
    if (options.micro !== undefined) {
      this.micro = new MicroService(this.nc, {
        name: options.service,
        version: options.micro.version,
        description: options.micro.description,
        metadata: { subject_prefix: options.prefix },
      });
      this.micro.start();
    }
  }

  /** The full NATS subject of a map entry. */
  subject(name: string): string {
    return `${this.prefix}.${name}`;
  }

  /** Sends a request and parses the reply (typed by the caller's contract: @svc/contracts). */
  async request(subject: string, request: unknown, options?: RequestOptions): Promise<unknown> {
    const data = await this.requestRaw(subject, request, options);
    return JSON.parse(decoder.decode(data));
  }

  /**
   * Sends a request and returns the reply's bytes undecoded (a gateway can pass them through as the HTTP
   * body). Throws an SvcError for an error reply or a transport failure.
   */
  async requestRaw(subject: string, request: unknown, options?: RequestOptions): Promise<Uint8Array> {
    const observers = this.requests;
    if (observers.empty) return this.sendRequest(subject, request, options);
    const started = performance.now();
    try {
      const reply = await this.sendRequest(subject, request, options);
      observers.notify(subject, performance.now() - started, "ok", reply.length);
      return reply;
    } catch (error) {
      const outcome = error instanceof SvcError ? error.code : "error";
      observers.notify(subject, performance.now() - started, outcome, 0);
      throw error;
    }
  }

  private async sendRequest(
    subject: string,
    request: unknown,
    options?: RequestOptions,
  ): Promise<Uint8Array> {
    const now = Date.now();
    const deadline = options?.deadline ?? now + (options?.timeoutMs ?? this.defaultTimeoutMs);
    const timeout = Math.max(1, deadline - now);
    const h = natsHeaders();
    h.set(Header.Deadline, String(deadline));
    if (options?.requestId !== undefined) h.set(Header.RequestId, options.requestId);
    for (const [name, value] of Object.entries(options?.headers ?? {})) h.set(name, value);
    // Fail fast while the connection is down: a request would be buffered and time out (504) instead.
    if (!isNatsConnected(this.nc)) {
      throw new ServiceUnavailableError(ownerOf(subject), {
        cause: new Error("the NATS connection is down"),
      });
    }
    // The request's span (messaging conventions), its context sent in `traceparent`.
    const span = tracingEnabled() ? this.span(subject, SpanKind.CLIENT, "send") : undefined;
    if (span !== undefined) injectSpan((name, value) => h.set(name, value), span);
    let reply: Msg;
    try {
      reply = await this.nc.request(this.subject(subject), encodeJson(request), { timeout, headers: h });
    } catch (error) {
      const svcError = this.transportError(subject, timeout, error);
      failed(span, svcError);
      span?.end();
      throw svcError;
    }
    const code = reply.headers?.get(Header.ErrorCode);
    if (code !== undefined && code !== "") {
      let body: unknown;
      try {
        body = JSON.parse(decoder.decode(reply.data));
      } catch {
        body = undefined;
      }
      const svcError = fromWire(code, body);
      span?.setAttribute("error.type", code);
      if (svcError.status >= 500) failed(span, svcError);
      span?.end();
      throw svcError;
    }
    span?.end();
    return reply.data;
  }

  /** A span of a NATS hop on `subject` (OpenTelemetry messaging conventions). */
  private span(subject: string, kind: SpanKind, operation: string, parent?: Context): Span | undefined {
    const span = startSpan(this.service, `${operation} ${subject}`, {
      kind,
      ...(parent === undefined ? {} : { parent }),
    });
    // Attributes only on a span that is kept: most are not sampled, and the sampler does not read them.
    if (span?.isRecording()) {
      span.setAttributes({
        "messaging.system": "nats",
        "messaging.destination.name": this.subject(subject),
        "messaging.operation.type": operation,
        "svc.service": this.service,
      });
    }
    return span;
  }

  private transportError(subject: string, timeoutMs: number, error: unknown): SvcError {
    const service = ownerOf(subject);
    if (
      error instanceof natsErrors.TimeoutError ||
      (error as Error)?.cause instanceof natsErrors.TimeoutError
    ) {
      return new TimeoutError(service, timeoutMs, { cause: error });
    }
    if (
      error instanceof natsErrors.NoRespondersError ||
      (error instanceof natsErrors.RequestError && error.isNoResponders())
    ) {
      return new ServiceUnavailableError(service, { cause: error, operation: subject });
    }
    if (
      error instanceof natsErrors.ClosedConnectionError ||
      error instanceof natsErrors.DrainingConnectionError ||
      error instanceof natsErrors.RequestError
    ) {
      return new ServiceUnavailableError(service, { cause: error });
    }
    return new InternalError({ cause: error });
  }

  /**
   * Answers requests on a subject, in this service's queue group (or on every replica, `fanOut`), each
   * checked by `decode` first (a contract's: @svc/contracts serves routes and messages through here).
   */
  serve<Req, Rep>(subject: string, handler: Handler<Req, Rep>, options: ServeOptions<Req>): void {
    const full = this.subject(subject);
    const queue = options.fanOut ? undefined : (options.queue ?? this.service);
    // Endpoint names are one token: the subject without its service, dots as underscores.
    const owner = `${this.service}.`;
    const name = (subject.startsWith(owner) ? subject.slice(owner.length) : subject).replaceAll(".", "_");
    const stats = this.micro?.addEndpoint(name, full, queue);
    const sub = this.nc.subscribe(full, {
      ...(queue === undefined ? {} : { queue }),
      callback: (err, msg) => {
        if (err !== null) {
          this.log.error({ err, subject: full }, "subscription failed");
          return;
        }
        this.track(this.handle(subject, msg, handler, options, stats));
      },
    });
    this.subscriptions.push(sub);
  }

  private async handle<Req, Rep>(
    subject: string,
    msg: Msg,
    handler: Handler<Req, Rep>,
    options: ServeOptions<Req>,
    stats: EndpointStats | undefined,
  ) {
    const started = process.hrtime.bigint();
    const requestId = msg.headers?.get(Header.RequestId) || undefined;
    const deadlineHeader = Number(msg.headers?.get(Header.Deadline));
    const deadline =
      Number.isFinite(deadlineHeader) && deadlineHeader > 0 ? deadlineHeader : Date.now() + 30_000;
    const context: HandlerContext = {
      subject: msg.subject,
      requestId,
      header: headerReader(msg).get,
      deadline,
      log: requestId === undefined ? this.log : this.log.child({ requestId }),
    };
    if (Date.now() > deadline) {
      // The caller has already given up; doing the work would only add load.
      context.log.debug({ subject: msg.subject }, "request past its deadline, skipped");
      return;
    }
    // The handler's span continues the caller's trace (its `traceparent`), when tracing is on.
    const parent = tracingEnabled() ? extractContext(headerReader(msg)) : undefined;
    const span = parent === undefined ? undefined : this.span(subject, SpanKind.SERVER, "process", parent);
    try {
      let payload: unknown;
      try {
        payload = msg.data.length === 0 ? {} : JSON.parse(decoder.decode(msg.data));
      } catch (cause) {
        throw new SvcError(ErrorCode.ValidationFailed, "The request payload is not valid JSON.", { cause });
      }
      const request = options.decode(payload);
      // The handler runs inside the request's deadline: the data layer refuses to start or commit work
      // after it (the caller has answered 504 by then).
      const result = await withSpan(
        span,
        () => runWithDeadline(deadline, () => handler(request, context)),
        parent,
      );
      if (msg.reply) msg.respond(encodeJson(result));
      stats?.record(process.hrtime.bigint() - started);
      span?.end();
    } catch (error) {
      const svcError = fromUnexpected(error);
      if (svcError.code === ErrorCode.Internal) {
        context.log.error({ err: error, subject: msg.subject }, "handler failed");
      } else if (!(error instanceof SvcError)) {
        context.log.warn(
          { error: (error as Error).message, subject: msg.subject },
          "the database is unavailable",
        );
      }
      if (msg.reply) this.respondError(msg, svcError);
      stats?.record(process.hrtime.bigint() - started, `${svcError.status}: ${svcError.message}`);
      span?.setAttribute("error.type", svcError.code);
      if (svcError.status >= 500) failed(span, svcError);
      span?.end();
    }
  }

  private respondError(msg: Msg, svcError: SvcError): void {
    const h: MsgHdrs = natsHeaders();
    h.set(Header.ErrorCode, svcError.code);
    // The service protocol's error headers, for NATS tooling.
    h.set(MicroHeader.ErrorCode, String(svcError.status));
    h.set(MicroHeader.Error, svcError.message.replace(/[\r\n]+/g, " "));
    msg.respond(encodeJson({ detail: svcError.message, ...svcError.extensions }), { headers: h });
  }

  /**
   * Scatter-gather: sends one request that every fan-out responder answers, and collects the replies
   * until none has arrived for `stallMs` (or `maxWaitMs` passed). Error replies are skipped.
   */
  async requestAll(
    subject: string,
    request: unknown,
    options: { readonly maxWaitMs?: number; readonly stallMs?: number } = {},
  ): Promise<unknown[]> {
    const replies: unknown[] = [];
    try {
      const iterable = await this.nc.requestMany(this.subject(subject), encodeJson(request), {
        strategy: "stall",
        maxWait: options.maxWaitMs ?? 1_000,
        stall: options.stallMs ?? 100,
      });
      for await (const msg of iterable) {
        if (msg.headers?.get(Header.ErrorCode)) continue;
        try {
          replies.push(JSON.parse(decoder.decode(msg.data)));
        } catch {
          // a malformed reply is skipped
        }
      }
    } catch (error) {
      if (!(error instanceof natsErrors.RequestError || error instanceof natsErrors.NoRespondersError))
        throw error;
    }
    return replies;
  }

  /** Publishes a fan-out notification. */
  broadcast(subject: string, payload: unknown): void {
    if (!tracingEnabled()) {
      this.nc.publish(this.subject(subject), encodeJson(payload));
      return;
    }
    const span = this.span(subject, SpanKind.PRODUCER, "publish");
    const h = natsHeaders();
    if (span !== undefined) injectSpan((name, value) => h.set(name, value), span);
    this.nc.publish(this.subject(subject), encodeJson(payload), { headers: h });
    span?.end();
  }

  /**
   * Receives every fan-out notification on a subject (no queue group: every replica gets it), each checked
   * by `decode` first; one that is not JSON or that `decode` refuses is logged and dropped.
   */
  onBroadcast<P>(
    subject: string,
    decode: (payload: unknown) => P,
    handler: (payload: P) => void | Promise<void>,
  ): void {
    const full = this.subject(subject);
    const sub = this.nc.subscribe(full, {
      callback: (err, msg) => {
        if (err !== null) return;
        let payload: P;
        try {
          payload = decode(JSON.parse(decoder.decode(msg.data)));
        } catch {
          this.log.warn({ subject: full }, "ignored a malformed broadcast");
          return;
        }
        if (!tracingEnabled()) {
          this.track(Promise.resolve().then(() => handler(payload)));
          return;
        }
        const parent = extractContext(headerReader(msg));
        const span = this.span(subject, SpanKind.CONSUMER, "process", parent);
        this.track(
          withSpan(span, () => Promise.resolve().then(() => handler(payload)), parent).finally(() =>
            span?.end(),
          ),
        );
      },
    });
    this.subscriptions.push(sub);
  }

  private track(promise: Promise<unknown>): void {
    const tracked = promise.catch((err: unknown) => this.log.error({ err }, "background handler failed"));
    this.inFlight.add(tracked);
    void tracked.finally(() => this.inFlight.delete(tracked));
  }

  /** Number of handlers still running. */
  get pending(): number {
    return this.inFlight.size;
  }

  /**
   * Stops taking new messages, lets handlers already running finish and reply, then drains and closes the
   * connection. Messages the server had already sent to this replica are processed by the drain.
   */
  async drain(): Promise<void> {
    if (this.nc.isClosed()) return;
    this.micro?.stop();
    await Promise.all(this.subscriptions.map((s) => s.drain().catch(() => undefined)));
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    if (this.nc.isClosed() || this.nc.isDraining()) return;
    try {
      await this.nc.drain();
    } catch (error) {
      // The server is gone (its own shutdown, a network cut): nothing is left to flush, just close.
      this.log.warn({ err: error }, "nats drain failed; closing the connection");
      await this.nc.close().catch(() => undefined);
    }
  }
}
