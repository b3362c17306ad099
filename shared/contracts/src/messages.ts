/**
 * The subjects services use among themselves besides the operator routes, each one a typed contract like a
 * route: request/reply messages (`defineMessages`) and fan-out broadcasts (`defineBroadcasts`), each with
 * TypeBox schemas. The owner serves its messages with `serveMessages` (every request is checked against the
 * request schema, and in development and tests every reply against the reply schema); a caller sends
 * through `messageClient(bus, <owner's messages>)`, whose names and payloads are typed by the contract.
 * The bus itself knows no subject: nothing is declared by module augmentation.
 */
import { type Static, type TSchema } from "@sinclair/typebox";
import type { Bus, HandlerContext, RequestOptions } from "@svc/bus";
import { InternalError } from "@svc/errors";

import { checker, checkReplies, requireValid, requireValidReply } from "./checks.js";

/** What a request/reply message declares; `defineMessages` adds its subject. */
export interface MessageSpec {
  readonly summary: string;
  readonly request: TSchema;
  readonly reply: TSchema;
  /**
   * Every replica answers (no queue group): a scatter-gather request, sent with `requestAll`. Otherwise
   * the replicas of the owner share the requests.
   */
  readonly fanOut?: boolean;
}

export type RequestOfMessage<C> = C extends { readonly request: infer T extends TSchema } ? Static<T> : never;
export type ReplyOfMessage<C> = C extends { readonly reply: infer T extends TSchema } ? Static<T> : never;

/** A message as declared and bound to its owner: the subject is `<service>.<name>`. */
export type MessageContract<S extends MessageSpec = MessageSpec, Subject extends string = string> = S & {
  readonly service: string;
  readonly subject: Subject;
  /** Checks a received request against the request schema: a ValidationError lists each violation. */
  readonly decode: (payload: unknown) => RequestOfMessage<S>;
  /** Checks a reply against the reply schema (development and tests): an InternalError on a mismatch. */
  readonly checkReply: (reply: unknown) => void;
};

/** What a broadcast declares. */
export interface BroadcastSpec {
  readonly summary: string;
  readonly payload: TSchema;
}

export type PayloadOf<C> = C extends { readonly payload: infer T extends TSchema } ? Static<T> : never;

export type BroadcastContract<
  S extends BroadcastSpec = BroadcastSpec,
  Subject extends string = string,
> = S & {
  readonly service: string;
  readonly subject: Subject;
  /** Checks a received payload: a ValidationError lists each violation. */
  readonly decode: (payload: unknown) => PayloadOf<S>;
};

function bindMessage<S extends MessageSpec, Subject extends string>(
  service: string,
  subject: Subject,
  spec: S,
): MessageContract<S, Subject> {
  const checkRequest = checker(spec.request);
  const checkReply = checker(spec.reply);
  return {
    ...spec,
    service,
    subject,
    decode(payload) {
      requireValid(checkRequest, payload);
      return payload as RequestOfMessage<S>;
    },
    checkReply: (reply) => requireValidReply(checkReply, subject, reply),
  };
}

/**
 * Declares the request/reply messages a service owns: each key becomes the name and the subject
 * `<service>.<key>` (as a type too).
 */
export function defineMessages<const Service extends string, const Specs extends Record<string, MessageSpec>>(
  service: Service,
  specs: Specs,
): { readonly [K in keyof Specs & string]: MessageContract<Specs[K], `${Service}.${K}`> } {
  const out: Record<string, MessageContract> = {};
  for (const [name, spec] of Object.entries(specs))
    out[name] = bindMessage(service, `${service}.${name}`, spec);
  return out as { readonly [K in keyof Specs & string]: MessageContract<Specs[K], `${Service}.${K}`> };
}

/** Declares the broadcasts a service sends: each key becomes the subject `<service>.<key>`. */
export function defineBroadcasts<
  const Service extends string,
  const Specs extends Record<string, BroadcastSpec>,
>(
  service: Service,
  specs: Specs,
): { readonly [K in keyof Specs & string]: BroadcastContract<Specs[K], `${Service}.${K}`> } {
  const out: Record<string, BroadcastContract> = {};
  for (const [name, spec] of Object.entries(specs)) {
    const check = checker(spec.payload);
    out[name] = {
      ...spec,
      service,
      subject: `${service}.${name}`,
      decode(payload) {
        requireValid(check, payload);
        return payload;
      },
    };
  }
  return out as { readonly [K in keyof Specs & string]: BroadcastContract<Specs[K], `${Service}.${K}`> };
}

export type MessageHandler<C> = (
  request: RequestOfMessage<C>,
  context: HandlerContext,
) => Promise<ReplyOfMessage<C>> | ReplyOfMessage<C>;

/**
 * A service's implementation of its messages: one handler per message of its contract, typed by it, so a
 * message without a handler, or a handler whose request or reply breaks the schemas, does not compile.
 */
export type MessageImplementation<Messages> = {
  readonly [K in keyof Messages]: MessageHandler<Messages[K]>;
};

/** Serves one message on its subject: in the owner's queue group, or on every replica for a fan-out one. */
export function serveMessage<S extends MessageSpec, Subject extends string>(
  bus: Bus,
  message: MessageContract<S, Subject>,
  handler: MessageHandler<NoInfer<S>>,
): void {
  bus.serve(
    message.subject,
    async (request: RequestOfMessage<S>, context) => {
      const reply = await handler(request, context);
      if (checkReplies) message.checkReply(reply);
      return reply;
    },
    { decode: message.decode, fanOut: message.fanOut === true },
  );
}

/** Serves every message of a service's contract (`defineMessages`) with its implementation. */
export function serveMessages<const Messages extends Record<string, MessageContract>>(
  bus: Bus,
  messages: Messages,
  implementation: MessageImplementation<Messages>,
): void {
  for (const name of Object.keys(messages)) {
    // Each handler is typed by its own message above; here they are served one like another.
    serveMessage(bus, messages[name] as MessageContract, implementation[name] as MessageHandler<MessageSpec>);
  }
}

type FanOutNames<Messages> = {
  [K in keyof Messages]: Messages[K] extends { readonly fanOut: true } ? K : never;
}[keyof Messages];
type SingleNames<Messages> = Exclude<keyof Messages, FanOutNames<Messages>>;

/** A caller's view of another service's messages: names, requests and replies typed by its contract. */
export interface MessageClient<Messages> {
  /** Sends a request that one replica answers, and decodes the reply. */
  request<K extends SingleNames<Messages>>(
    name: K,
    request: RequestOfMessage<Messages[K]>,
    options?: RequestOptions,
  ): Promise<ReplyOfMessage<Messages[K]>>;
  /** As `request`, returning the reply's bytes undecoded (a gateway passes them through as a body). */
  requestRaw<K extends SingleNames<Messages>>(
    name: K,
    request: RequestOfMessage<Messages[K]>,
    options?: RequestOptions,
  ): Promise<Uint8Array>;
  /** Scatter-gather: every replica's reply, collected until none has come for `stallMs`. */
  requestAll<K extends FanOutNames<Messages>>(
    name: K,
    request: RequestOfMessage<Messages[K]>,
    options?: { readonly maxWaitMs?: number; readonly stallMs?: number },
  ): Promise<Array<ReplyOfMessage<Messages[K]>>>;
}

/**
 * A typed client of the messages `messages` declares. Replies are trusted as the owner's contract types
 * them: the owner checks its own replies in development and tests.
 */
export function messageClient<const Messages extends Record<string, MessageContract>>(
  bus: Bus,
  messages: Messages,
): MessageClient<Messages> {
  return new BusMessageClient(bus, messages);
}

class BusMessageClient<Messages extends Record<string, MessageContract>> implements MessageClient<Messages> {
  constructor(
    private readonly bus: Bus,
    private readonly messages: Messages,
  ) {}

  private subject(name: PropertyKey): string {
    const message = this.messages[name as string];
    if (message === undefined) throw new InternalError({ cause: new Error(`no message ${String(name)}`) });
    return message.subject;
  }

  async request<K extends SingleNames<Messages>>(
    name: K,
    request: RequestOfMessage<Messages[K]>,
    options?: RequestOptions,
  ): Promise<ReplyOfMessage<Messages[K]>> {
    return (await this.bus.request(this.subject(name), request, options)) as ReplyOfMessage<Messages[K]>;
  }

  requestRaw<K extends SingleNames<Messages>>(
    name: K,
    request: RequestOfMessage<Messages[K]>,
    options?: RequestOptions,
  ): Promise<Uint8Array> {
    return this.bus.requestRaw(this.subject(name), request, options);
  }

  async requestAll<K extends FanOutNames<Messages>>(
    name: K,
    request: RequestOfMessage<Messages[K]>,
    options?: { readonly maxWaitMs?: number; readonly stallMs?: number },
  ): Promise<Array<ReplyOfMessage<Messages[K]>>> {
    const replies = await this.bus.requestAll(this.subject(name), request, options);
    return replies as Array<ReplyOfMessage<Messages[K]>>;
  }
}

/** Publishes a broadcast to every replica listening (core NATS: nothing is kept). */
export function publishBroadcast<C extends BroadcastContract>(
  bus: Bus,
  broadcast: C,
  payload: PayloadOf<C>,
): void {
  bus.broadcast(broadcast.subject, payload);
}

/**
 * Receives every broadcast on `broadcast`'s subject (no queue group: every replica gets each one); a
 * payload that breaks its schema is logged and dropped.
 */
export function onBroadcast<C extends BroadcastContract>(
  bus: Bus,
  broadcast: C,
  handler: (payload: PayloadOf<C>) => void | Promise<void>,
): void {
  bus.onBroadcast(broadcast.subject, broadcast.decode as (payload: unknown) => PayloadOf<C>, handler);
}
