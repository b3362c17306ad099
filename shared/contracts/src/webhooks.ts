/** Routes the webhook dispatcher owns: subscriptions, the event catalogue and flows. */
import { Type } from "@sinclair/typebox";

import { idParams, Nullable, Page, pageFields, Uuid } from "./common.js";
import { defineRoutes } from "./route.js";

/** Spec 2.3: a subscription's event name: letters, digits, `_`, `.`, `-`, and `*` as the only wildcard. */
export const SUBSCRIPTION_PATTERN = "^[\\w.\\-*]{1,120}$";
/** Longest target URL stored (the column allows 2,048 characters). */
export const MAX_TARGET_URL = 2_048;

export const SubscriptionView = Type.Object({
  id: Uuid,
  workspaceKey: Nullable(Type.String()),
  eventName: Type.String(),
  targetUrl: Type.String(),
  isActive: Type.Boolean(),
  includeSensitiveData: Type.Boolean(),
  createdAtUtc: Type.String(),
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
        eventName: Type.String({ pattern: SUBSCRIPTION_PATTERN }),
        /** An absolute http(s) URL without credentials; literal private addresses are refused. */
        targetUrl: Type.String({ format: "uri", maxLength: MAX_TARGET_URL }),
        secret: Type.String({ minLength: 1, maxLength: 500 }),
        workspaceKey: Type.Optional(Nullable(Type.String({ maxLength: 63 }))),
        includeSensitiveData: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
    reply: SubscriptionView,
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
      Type.Object({ eventName: Type.String(), source: Type.String(), description: Type.String() }),
    ),
  },
  "flows.list": { method: "GET", path: "/api/flows", permission: "flow.read", summary: "List flows" },
  "flows.create": { method: "POST", path: "/api/flows", permission: "flow.manage", summary: "Create a flow" },
  "flows.put": { method: "PUT", path: "/api/flows/:id", permission: "flow.manage", summary: "Update a flow" },
  "flows.delete": {
    method: "DELETE",
    path: "/api/flows/:id",
    permission: "flow.manage",
    summary: "Delete a flow",
  },
});
