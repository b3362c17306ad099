/**
 * The wire contract: what any NATS client, in any language, sends and receives to take part in the
 * platform (docs/wire-contract.md): the headers, the subjects, an operator route's request and reply, a
 * plugin route's request and reply, an error reply, a service's ping, and the body and headers of a
 * webhook delivery. The platform's own services use these declarations, so the document and the code
 * cannot drift apart.
 *
 * This is public interface, tracked by `make api-check` against its baselines in docs/api/ (see
 * docs/releasing.md). Adding is free; changing or removing a shipped declaration breaks
 * plugins and other clients built against it.
 *
 * @packageDocumentation
 */

/** The subject prefix of a deployment unless it sets `SVC_SUBJECT_PREFIX`. */
export const DEFAULT_SUBJECT_PREFIX = "svc";

/** NATS header names on requests, replies and events. */
export const Header = {
  /** Correlates a request across services and logs. */
  RequestId: "Svc-Request-Id",
  /** Absolute deadline of the request, epoch milliseconds: answer before it or not at all. */
  Deadline: "Svc-Deadline",
  /** Present on error replies only: the stable error code; the body is an {@link ErrorReplyBody}. */
  ErrorCode: "Svc-Error-Code",
  /** Workspace key of an event (platform-wide events omit it). */
  WorkspaceKey: "Svc-Workspace-Key",
  /** When the event happened (ISO 8601); defaults to when it was published. */
  OccurredAt: "Svc-Occurred-At",
  /** How many flows led to this event; set by the platform only (flows stop at a limit). */
  FlowDepth: "Svc-Flow-Depth",
  /** The id of the event that started a chain of flows; set by the platform only (a chain's budget). */
  FlowRoot: "Svc-Flow-Root",
  /**
   * Who published an event: `platform` (a platform service), `plugin:<pluginId>` or `flow:<flowId>`
   * ({@link EventSource}). Without it an event counts as its name's plugin's. The webhook dispatcher
   * drops, and counts, an event whose name does not belong to its source.
   */
  EventSource: "Svc-Event-Source",
  /** JetStream de-duplication id of a published event: one per logical event. */
  MsgId: "Nats-Msg-Id",
  /**
   * On operator route requests: the caller's principal as the gateway established it, signed by the
   * gateway (a JWT); the owning service acts on this, not on the principal in the body.
   */
  Principal: "Svc-Principal",
  /**
   * On operator route requests sent with an `Idempotency-Key`: the key as the gateway scoped it to its
   * caller (a digest), and a digest of the request it came with. The owning service keeps the outcome
   * under it, in the same transaction as the change.
   */
  IdempotencyKey: "Svc-Idempotency-Key",
  IdempotencyFingerprint: "Svc-Idempotency-Fingerprint",
} as const;
/** One of the `Header` names. */
export type Header = (typeof Header)[keyof typeof Header];

/** HTTP header names of a webhook delivery. */
export const WebhookHeader = {
  /** The event name. */
  Event: "X-Svc-Event",
  /** One id per delivery, the same on every retry: receivers deduplicate on it. */
  Delivery: "X-Svc-Delivery",
  /** `sha256=<hex>`: HMAC-SHA256 of the exact body bytes, keyed by the subscription's secret. */
  Signature: "X-Svc-Signature",
} as const;
/** One of the `WebhookHeader` names. */
export type WebhookHeader = (typeof WebhookHeader)[keyof typeof WebhookHeader];

/**
 * The Standard Webhooks headers of a delivery (standardwebhooks.com), sent beside `WebhookHeader`'s: a
 * receiver may verify either scheme.
 */
export const StandardWebhookHeader = {
  /** The delivery id, as `X-Svc-Delivery`: the same on every attempt. */
  Id: "webhook-id",
  /** The attempt's time, in unix seconds. */
  Timestamp: "webhook-timestamp",
  /**
   * `v1,<base64>`: HMAC-SHA256 of `{id}.{timestamp}.{body}`, keyed by the base64 bytes of a `whsec_`
   * secret or by the UTF-8 bytes of any other; several space-separated when several secrets are valid.
   */
  Signature: "webhook-signature",
} as const;
/** One of the `StandardWebhookHeader` names. */
export type StandardWebhookHeader = (typeof StandardWebhookHeader)[keyof typeof StandardWebhookHeader];

/** The `Svc-Event-Source` of an event: who published it. */
export const EventSource = {
  /** A platform service: only the platform's own events (the catalogue's built-in names). */
  Platform: "platform",
  /** A plugin: only the `<pluginId>.` events it declares, platform-wide or into a workspace whose chain holds it. */
  plugin: (pluginId: string): string => `plugin:${pluginId}`,
  /** A flow: `flow.<name>` events, or a plugin's events where its workspace may raise them. */
  flow: (flowId: string): string => `flow:${flowId}`,
} as const;

/** An event name: 1 to 120 letters, digits, `_`, `.` or `-` (subscriptions may also use `*`). */
export const EVENT_NAME_PATTERN: RegExp = /^[\w.-]{1,120}$/;

/** The subject an event is published on: `<prefix>.events.<eventName>`; without a name, the stream's filter. */
export function eventsSubject(prefix: string, eventName = ">"): string {
  return `${prefix}.events.${eventName}`;
}

/** The subject the gateway sends a plugin's routes to: `<prefix>.plugins.<pluginId>.http`. */
export function pluginHttpSubject(prefix: string, pluginId: string): string {
  return `${prefix}.plugins.${pluginId}.http`;
}

/** The queue group a plugin's replicas share its subject in: `plugin.<pluginId>`. */
export function pluginQueueGroup(pluginId: string): string {
  return `plugin.${pluginId}`;
}

/** Session scope: the whole platform, or one workspace. */
export const Scope = { Platform: "platform", Workspace: "workspace" } as const;
/** `platform` or `workspace`. */
export type Scope = (typeof Scope)[keyof typeof Scope];

/**
 * Who is calling, as the gateway established it; travels with every operator and plugin route request so
 * that the receiver applies the caller's reach (scope and workspace) to what it returns.
 */
export interface Principal {
  /** The user id, or the API client's id. */
  readonly subject: string;
  /** null: no scope claim, which never grants platform reach. */
  readonly scope: Scope | null;
  /** The workspace of a workspace-scoped session; null for platform sessions. */
  readonly workspaceKey: string | null;
  /** The permission keys the session holds (`*`: every key). */
  readonly permissions: readonly string[];
  readonly roles: readonly string[];
  /** The user's name (userName) for a signed-in user's session; absent for API keys and other callers. */
  readonly name?: string;
}

/**
 * What the gateway sends a service for an operator route on `<prefix>.<service>.<resource>.<verb>`: the
 * authenticated principal and the validated route parameters, query and body.
 */
export interface RouteRequest<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  readonly principal: Principal;
  readonly params: P;
  readonly query: Q;
  readonly body: B;
}

/** A service's answer to an operator route; errors travel as error replies instead. */
export interface RouteReply<T = unknown> {
  readonly status: number;
  readonly body?: T;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The body of an error reply, sent with the `Svc-Error-Code` header (one of the operator guide's
 * codes); the gateway turns it into an RFC 9457 problem document. Extension members are copied into it.
 */
export interface ErrorReplyBody {
  readonly detail: string;
  readonly [member: string]: unknown;
}

/** What every replica answers on `<prefix>.<service>.ping`. */
export interface PingReply {
  readonly service: string;
  /** This replica's id. */
  readonly instance: string;
  /** The host version it was built as. */
  readonly version: string;
  readonly uptimeMs: number;
}

/** The route of a plugin's registry.json that a request matched. */
export interface PluginRouteRef {
  readonly method: string;
  /** As declared, with `:name` parameters. */
  readonly path: string;
  /** The entry object's method that answers it. */
  readonly handler: string;
}

/** What the gateway sends on a plugin's subject (`<prefix>.plugins.<pluginId>.http`) for one HTTP request. */
export interface PluginHttpRequest {
  readonly route: PluginRouteRef;
  readonly method: string;
  /** The path under `/api/plugins/<pluginId>`. */
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, unknown>>;
  /** Only `content-type`, `accept`, `accept-language` and `user-agent`, lower case. */
  readonly headers: Readonly<Record<string, string>>;
  /** The parsed JSON body, or null. */
  readonly body: unknown;
  readonly principal: Principal;
}

/** A plugin's answer on its subject: `body` omitted for an empty answer. */
export interface PluginHttpReply {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
}

/** The JSON body of a webhook delivery. */
export interface WebhookDelivery<T = unknown> {
  readonly event: string;
  /** null for a platform-wide event. */
  readonly workspaceKey: string | null;
  /** ISO 8601. */
  readonly occurredAtUtc: string;
  /** The event's payload, sensitive fields masked unless the subscription asked for them. */
  readonly data: T;
}
