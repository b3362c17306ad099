/** Routes the webhook dispatcher owns: subscriptions, the event catalogue and flows. */
import { Type } from "@sinclair/typebox";

import { idParams, Nullable, Page, pageFields, PermissionKeyString, Uuid } from "./common.js";
import { defineRoutes } from "./route.js";

/**
 * A subscription's event name: letters, digits, `_`, `.`, `-`, and one `*` at the end, a prefix
 * wildcard (`*`, `workspace.*`, `workspace.create*`; ADR 0014).
 */
export const SUBSCRIPTION_PATTERN = "^(?:[\\w.\\-]{1,120}|[\\w.\\-]{0,119}\\*)$";
/** Longest target URL stored (the column allows 2,048 characters). */
export const MAX_TARGET_URL = 2_048;

export const SubscriptionView = Type.Object({
  id: Uuid,
  workspaceKey: Nullable(Type.String()),
  eventName: Type.String(),
  targetUrl: Type.String(),
  isActive: Type.Boolean(),
  includeSensitiveData: Type.Boolean(),
  /** The operator's note on what the subscription is for ("" when none was given). */
  description: Type.String(),
  /** At most this many delivery attempts start per second, across every dispatcher (null: no limit). */
  throttlePerSecond: Nullable(Type.Integer()),
  /** The names of the headers sent with every delivery (their values are write-only, like the secret). */
  headerNames: Type.Array(Type.String()),
  /**
   * With `ed25519` on: the public key (`whpk_` and the base64 of its 32 bytes) that verifies the
   * deliveries' `v1a,` signatures; null when off.
   */
  ed25519PublicKey: Nullable(Type.String()),
  createdAtUtc: Type.String(),
  /** The last change by an operator (its settings, its activation) or by its receiver's 410 Gone. */
  updatedAtUtc: Type.String(),
  /**
   * After a secret rotation: until when deliveries are signed with the replaced secret too (null when no
   * replaced secret signs any more).
   */
  previousSecretExpiresAtUtc: Nullable(Type.String()),
  matchesKnownEvent: Type.Boolean(),
});

/** Longest description of a subscription. */
export const MAX_SUBSCRIPTION_DESCRIPTION = 500;
/** How many custom headers a subscription may send. */
export const MAX_SUBSCRIPTION_HEADERS = 20;
/** The highest throttle a subscription may set (attempts per second). */
export const MAX_THROTTLE_PER_SECOND = 10_000;

/** What create and replace share: what is delivered, where, and how it is signed. */
const subscriptionFields = {
  eventName: Type.String({ pattern: SUBSCRIPTION_PATTERN }),
  /** An absolute http(s) URL without credentials; literal private addresses are refused. */
  targetUrl: Type.String({ format: "uri", maxLength: MAX_TARGET_URL }),
  includeSensitiveData: Type.Optional(Type.Boolean()),
  description: Type.Optional(Type.String({ maxLength: MAX_SUBSCRIPTION_DESCRIPTION })),
  /** At most this many delivery attempts start per second, across every dispatcher; null or left out: none. */
  throttlePerSecond: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: MAX_THROTTLE_PER_SECOND }))),
  /**
   * Headers sent with every delivery (up to 20): names are HTTP tokens, none of the platform's own or
   * HTTP's hop-by-hop ones; values printable ASCII. Write-only: views show the names. On PUT, left out
   * keeps them, `{}` removes them.
   */
  /**
   * Also sign the Standard Webhooks asymmetric way (`v1a,` ed25519, beside the `v1,` HMAC): true makes a
   * key pair (kept on a PUT while it stays true), false drops it; left out on PUT, unchanged.
   */
  ed25519: Type.Optional(Type.Boolean()),
  headers: Type.Optional(
    Type.Record(
      Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$" }),
      Type.String({ pattern: "^[\\x20-\\x7E\\t]{0,1000}$" }),
      { maxProperties: MAX_SUBSCRIPTION_HEADERS, additionalProperties: false },
    ),
  ),
};

/**
 * Keys both signatures; `whsec_` and the base64 of 24-64 bytes is the Standard Webhooks form (its
 * libraries take it as is), and such a prefix on anything else is refused.
 */
const SubscriptionSecret = Type.String({ minLength: 1, maxLength: 500 });

/** A delivery's state in the log: delivered, waiting for another attempt, or failed for good. */
export const DeliveryStatus = Type.Union([
  Type.Literal("delivered"),
  Type.Literal("retrying"),
  Type.Literal("failed"),
]);

export const DeliverySummary = Type.Object({
  deliveryId: Uuid,
  subscriptionId: Uuid,
  eventName: Type.String(),
  eventId: Type.String(),
  /** The event's workspace. */
  workspaceKey: Nullable(Type.String()),
  status: DeliveryStatus,
  /** Attempts logged (a throttling receiver's deferred attempt counts here, not against the limit). */
  attempts: Type.Integer(),
  lastStatusCode: Nullable(Type.Integer()),
  /** The first attempt. */
  createdAtUtc: Type.String(),
  /** The latest attempt. */
  updatedAtUtc: Type.String(),
});

export const DeliveryDetail = Type.Composite([
  DeliverySummary,
  Type.Object({
    /** The body as sent (masked unless the subscription asked for sensitive data); null above 64 KiB. */
    payload: Nullable(
      Type.Object({
        event: Type.String(),
        workspaceKey: Nullable(Type.String()),
        occurredAtUtc: Type.String(),
        data: Type.Unknown(),
      }),
    ),
    /** When the next attempt is due, while the delivery is retrying. */
    nextAttemptAtUtc: Nullable(Type.String()),
    /** Every attempt logged, oldest first. */
    history: Type.Array(
      Type.Object({
        attempt: Type.Integer(),
        attemptedAtUtc: Type.String(),
        durationMs: Type.Integer(),
        outcome: Type.Union([Type.Literal("delivered"), Type.Literal("failed"), Type.Literal("deferred")]),
        statusCode: Nullable(Type.Integer()),
        /** The first 4 KiB of the receiver's answer. */
        responseExcerpt: Nullable(Type.String()),
        error: Nullable(Type.String()),
      }),
    ),
  }),
]);

/** A recovery of failed deliveries and its progress. */
export const RecoveryView = Type.Object({
  recoveryId: Uuid,
  subscriptionId: Uuid,
  sinceUtc: Type.String(),
  untilUtc: Type.String(),
  /** running: pages are still being queued; done: every failed delivery of the window was queued. */
  status: Type.Union([Type.Literal("running"), Type.Literal("done")]),
  /** Deliveries queued again so far. */
  queued: Type.Integer(),
  createdAtUtc: Type.String(),
  finishedAtUtc: Nullable(Type.String()),
});

/** Most actions one flow may hold. */
export const MAX_FLOW_ACTIONS = 10;

/**
 * A flow's actions. `title`, `detail` and string values of `data` may hold
 * placeholders: `{{event}}`, `{{eventId}}`, `{{workspaceKey}}`, `{{occurredAtUtc}}` and
 * `{{data.<path>}}` (a dotted path into the triggering event's data); an unknown one becomes empty.
 * The branches are open objects (an action's unknown properties are dropped by the flow service, as the
 * gateway drops those of closed objects): Ajv's removal of additional properties inside `anyOf` would
 * strip one branch's properties while trying another.
 */
export const FlowAction = Type.Union([
  Type.Object(
    {
      /** POST the event, as a webhook delivery would, to a URL (signed when a secret is set). */
      type: Type.Literal("http"),
      url: Type.String({ format: "uri", maxLength: MAX_TARGET_URL }),
      /** Write-only: the view shows `hasSecret`. On PUT, omit it to keep the stored one. */
      secret: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
      includeSensitiveData: Type.Optional(Type.Boolean()),
    },
    { title: "HttpAction" },
  ),
  Type.Object(
    {
      /**
       * Publish another event in the triggering event's workspace: a name under `flow.`, or an installed
       * plugin's event; never a core event of the platform (400).
       */
      type: Type.Literal("publish"),
      eventName: Type.String({ pattern: "^[\\w.-]{1,120}$" }),
      /** The new event's data; the triggering event's data when omitted. */
      data: Type.Optional(
        Type.Record(Type.String({ maxLength: 100 }), Type.Unknown(), { maxProperties: 50 }),
      ),
    },
    { title: "PublishAction" },
  ),
  Type.Object(
    {
      /** Notify the holders of `permission` (default flow.manage), as GET /api/notifications shows. */
      type: Type.Literal("notify"),
      title: Type.String({ minLength: 1, maxLength: 300 }),
      detail: Type.Optional(Type.String({ maxLength: 2_000 })),
      permission: Type.Optional(PermissionKeyString),
    },
    { title: "NotifyAction" },
  ),
]);

const FlowBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    /** The trigger, matched like a webhook subscription's: an event name, or `*` for every event. */
    eventName: Type.String({ pattern: SUBSCRIPTION_PATTERN }),
    actions: Type.Array(FlowAction, { minItems: 1, maxItems: MAX_FLOW_ACTIONS }),
    /** A platform session may leave it out (every workspace); a workspace session's flow is its own. */
    workspaceKey: Type.Optional(Nullable(Type.String({ maxLength: 63 }))),
    isActive: Type.Optional(Type.Boolean()),
  },
  {
    additionalProperties: false,
    examples: [
      {
        name: "Welcome new users",
        eventName: "user.created",
        actions: [
          { type: "http", url: "https://crm.example.com/hooks/svc", secret: "a shared secret" },
          { type: "publish", eventName: "flow.contact-requested", data: { userName: "{{data.userName}}" } },
          { type: "notify", title: "{{data.userName}} joined", permission: "user.read" },
        ],
      },
    ],
  },
);

export const FlowActionView = Type.Union([
  Type.Object({
    type: Type.Literal("http"),
    url: Type.String(),
    hasSecret: Type.Boolean(),
    includeSensitiveData: Type.Boolean(),
  }),
  Type.Object({
    type: Type.Literal("publish"),
    eventName: Type.String(),
    data: Nullable(Type.Record(Type.String(), Type.Unknown())),
  }),
  Type.Object({
    type: Type.Literal("notify"),
    title: Type.String(),
    detail: Nullable(Type.String()),
    permission: Type.String(),
  }),
]);

export const FlowView = Type.Object({
  id: Uuid,
  name: Type.String(),
  workspaceKey: Nullable(Type.String()),
  eventName: Type.String(),
  actions: Type.Array(FlowActionView),
  isActive: Type.Boolean(),
  createdAtUtc: Type.String(),
  updatedAtUtc: Type.String(),
  matchesKnownEvent: Type.Boolean(),
});

export const webhookRoutes = defineRoutes("webhook-dispatcher", {
  "webhooks.list": {
    method: "GET",
    path: "/api/webhooks",
    permission: "webhook.read",
    summary: "List webhook subscriptions (newest first)",
    query: Type.Object(
      { workspaceKey: Type.Optional(Type.String({ maxLength: 63 })), ...pageFields },
      { additionalProperties: false },
    ),
    reply: Page(SubscriptionView),
  },
  "webhooks.create": {
    method: "POST",
    path: "/api/webhooks",
    permission: "webhook.manage",
    summary: "Create a webhook subscription",
    body: Type.Object(
      {
        ...subscriptionFields,
        secret: SubscriptionSecret,
        workspaceKey: Type.Optional(Nullable(Type.String({ maxLength: 63 }))),
        /** Default true; a subscription created inactive receives nothing until activated. */
        isActive: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
    reply: SubscriptionView,
  },
  "webhooks.put": {
    method: "PUT",
    path: "/api/webhooks/:id",
    permission: "webhook.manage",
    summary:
      "Replace a subscription's settings (deliveries already queued go to the new target, signed with the secret of the moment)",
    params: idParams,
    body: Type.Object(
      {
        ...subscriptionFields,
        /** Write-only; omit it to keep the stored one. */
        secret: Type.Optional(SubscriptionSecret),
      },
      { additionalProperties: false },
    ),
    reply: SubscriptionView,
  },
  "webhooks.rotate-secret": {
    method: "POST",
    secretReply: true,
    path: "/api/webhooks/:id/secret/rotate",
    permission: "webhook.manage",
    summary:
      "Give a subscription a new, generated secret, shown in this answer only; the old one keeps signing beside it for the overlap",
    params: idParams,
    query: Type.Object(
      {
        /**
         * How long deliveries are also signed with the old secret (BackendHost:WebhookSecretOverlapSeconds
         * when left out; 0 drops it at once).
         */
        overlapSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_592_000 })),
      },
      { additionalProperties: false },
    ),
    reply: Type.Composite([
      SubscriptionView,
      Type.Object({
        /** The new secret, `whsec_` and the base64 of 32 random bytes: shown here once, never again. */
        secret: Type.String(),
      }),
    ]),
  },
  "webhooks.deliveries": {
    method: "GET",
    path: "/api/webhooks/:id/deliveries",
    permission: "webhook.read",
    summary: "A subscription's delivery log, newest first",
    params: idParams,
    query: Type.Object(
      {
        status: Type.Optional(DeliveryStatus),
        eventName: Type.Optional(Type.String({ maxLength: 120 })),
        /** Deliveries whose first attempt is at or after this moment. */
        since: Type.Optional(Type.String({ format: "date-time" })),
        /** Deliveries whose first attempt is before this moment. */
        until: Type.Optional(Type.String({ format: "date-time" })),
        ...pageFields,
      },
      { additionalProperties: false },
    ),
    reply: Page(DeliverySummary),
  },
  "webhooks.delivery": {
    method: "GET",
    path: "/api/webhooks/:id/deliveries/:deliveryId",
    permission: "webhook.read",
    summary: "One delivery with every attempt",
    params: Type.Object({ id: Uuid, deliveryId: Uuid }),
    reply: DeliveryDetail,
  },
  "webhooks.resend": {
    method: "POST",
    path: "/api/webhooks/:id/deliveries/:deliveryId/resend",
    permission: "webhook.manage",
    summary:
      "Send a delivery again: one more job with the same event, data and delivery id (webhook-id), to the subscription as it is now",
    params: Type.Object({ id: Uuid, deliveryId: Uuid }),
    reply: Type.Object({ deliveryId: Uuid, status: Type.Literal("retrying") }),
  },
  "webhooks.circuit": {
    method: "GET",
    path: "/api/webhooks/:id/circuit",
    permission: "webhook.read",
    summary: "The circuit breaker of a subscription's receiver (its workspace and its target's origin)",
    params: idParams,
    reply: Type.Object({
      /** The target's origin; one circuit per workspace and origin, shared by the subscriptions to it. */
      origin: Type.String(),
      /** closed: deliveries go; open: they wait, spending no attempt; half_open: the next one is a trial. */
      state: Type.Union([Type.Literal("closed"), Type.Literal("open"), Type.Literal("half_open")]),
      consecutiveFailures: Type.Integer(),
      /** While open: when the trial may go. */
      openUntilUtc: Nullable(Type.String()),
      /** Consecutive failures that open it (BackendHost:WebhookCircuitFailureThreshold). */
      threshold: Type.Integer(),
    }),
  },
  "webhooks.recover": {
    method: "POST",
    path: "/api/webhooks/:id/recover",
    permission: "webhook.manage",
    summary:
      "Send again every failed delivery whose first attempt is in the window: one durable job pages through them, a page (100) a second",
    params: idParams,
    query: Type.Object(
      {
        since: Type.String({ format: "date-time" }),
        /** Now when left out. */
        until: Type.Optional(Type.String({ format: "date-time" })),
      },
      { additionalProperties: false },
    ),
    reply: RecoveryView,
  },
  "webhooks.recovery": {
    method: "GET",
    path: "/api/webhooks/:id/recoveries/:recoveryId",
    permission: "webhook.read",
    summary: "A recovery's progress",
    params: Type.Object({ id: Uuid, recoveryId: Uuid }),
    reply: RecoveryView,
  },
  "webhooks.activation": {
    method: "PUT",
    path: "/api/webhooks/:id/activation",
    permission: "webhook.manage",
    summary: "Enable or disable a subscription",
    params: idParams,
    query: Type.Object({ isActive: Type.Boolean() }, { additionalProperties: false }),
    reply: SubscriptionView,
  },
  "webhooks.delete": {
    method: "DELETE",
    path: "/api/webhooks/:id",
    permission: "webhook.manage",
    summary: "Delete a subscription",
    params: idParams,
  },
  "events.catalog": {
    method: "GET",
    path: "/api/events/catalog",
    permission: "flow.read",
    summary: "The event catalogue",
    reply: Type.Array(
      Type.Object({
        eventName: Type.String(),
        source: Type.String({ description: "`host` for the platform's own events, else the plugin's id" }),
        description: Type.String(),
        schema: Nullable(
          Type.Record(Type.String(), Type.Unknown(), {
            description: "the JSON Schema of the event's `data` (null: its plugin declared none)",
          }),
        ),
        example: Type.Optional(Type.Unknown({ description: "an example of the event's `data`" })),
      }),
    ),
  },
  "flows.list": {
    method: "GET",
    path: "/api/flows",
    permission: "flow.read",
    summary: "List flows (newest first)",
    query: Type.Object(
      { workspaceKey: Type.Optional(Type.String({ maxLength: 63 })), ...pageFields },
      { additionalProperties: false },
    ),
    reply: Page(FlowView),
  },
  "flows.create": {
    method: "POST",
    path: "/api/flows",
    permission: "flow.manage",
    summary:
      "Create a flow: a trigger (an event name pattern) and the actions run, as durable jobs, on each match",
    body: FlowBody,
    reply: FlowView,
  },
  "flows.put": {
    method: "PUT",
    path: "/api/flows/:id",
    permission: "flow.manage",
    summary: "Replace a flow (runs already queued keep the actions they were queued with)",
    params: idParams,
    body: FlowBody,
    reply: FlowView,
  },
  "flows.delete": {
    method: "DELETE",
    path: "/api/flows/:id",
    permission: "flow.manage",
    summary: "Delete a flow (its queued runs do nothing)",
    params: idParams,
  },
});
