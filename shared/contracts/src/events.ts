/**
 * The platform's own events: what each one's `data` holds, as a JSON Schema with an example. The event
 * catalogue (`GET /api/events/catalog`) serves them, so the console and receivers can generate types; the
 * publishers are typed by the same schemas (`Outbox<PlatformEventData>`, `publishPlatformEvent`), so a
 * payload that drifts from its schema, or an event not listed here, does not compile. The list is the
 * catalogue's `host` rows: the webhook dispatcher writes them from it when it starts.
 */
import { type Static, type TObject, Type } from "@sinclair/typebox";

import { Nullable } from "./common.js";
import { MediaView } from "./media.js";
import { WorkspaceView } from "./resolver.js";

const Text = (options?: { description?: string; maxLength?: number }) => Type.String(options);
const Uuid = () => Type.String({ format: "uuid" });

const UserData = Type.Object(
  {
    userId: Uuid(),
    userName: Text(),
    displayName: Text(),
    email: Nullable(Text()),
    /** Present when the change was the user's activation (`PUT /api/users/{id}/activation`). */
    isActive: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/** An event of the platform: what the catalogue says of it, its `data`'s schema, and an example of it. */
const event = <T extends TObject>(description: string, data: T, example: Static<T>) => ({
  description,
  data,
  example,
});

const WORKSPACE_EXAMPLE: Static<typeof WorkspaceView> = {
  workspaceKey: "acme-shop",
  tenantKey: "acme",
  name: "Acme shop",
  type: "base",
  isActive: true,
  accessPolicy: "Public",
  bindings: [{ host: "shop.acme.example", pathPrefix: "/" }],
  publicBaseUrl: "https://shop.acme.example/",
  createdAtUtc: "2026-01-05T09:30:00.000Z",
  updatedAtUtc: "2026-01-05T09:30:00.000Z",
};
const USER_EXAMPLE = {
  userId: "0b8f3f8e-5d0c-4a8e-9a51-1f2c3d4e5f60",
  userName: "ada",
  displayName: "Ada Lovelace",
  email: "ada@example.com",
};

/** Each platform event: its description, its `data`'s schema and an example. */
export const platformEvents = {
  "user.created": event("An account is created", UserData, USER_EXAMPLE),
  "user.updated": event("An account is updated", UserData, { ...USER_EXAMPLE, isActive: false }),
  "user.deleted": event(
    "An account is deleted",
    Type.Object({ userId: Uuid(), userName: Text() }, { additionalProperties: false }),
    {
      userId: USER_EXAMPLE.userId,
      userName: "ada",
    },
  ),
  "workspace.created": event("A workspace is created", WorkspaceView, WORKSPACE_EXAMPLE),
  "workspace.updated": event("A workspace is updated", WorkspaceView, {
    ...WORKSPACE_EXAMPLE,
    name: "Acme store",
  }),
  "workspace.deleted": event(
    "A workspace is deleted",
    Type.Object({ workspaceKey: Text(), tenantKey: Text() }, { additionalProperties: false }),
    { workspaceKey: "acme-shop", tenantKey: "acme" },
  ),
  "workspace.member-assigned": event(
    "A user becomes a member of a workspace",
    Type.Object({ workspaceKey: Text(), userId: Uuid(), userName: Text() }, { additionalProperties: false }),
    { workspaceKey: "acme-shop", userId: USER_EXAMPLE.userId, userName: "ada" },
  ),
  "workspace.member-removed": event(
    "A user stops being a member of a workspace",
    Type.Object({ workspaceKey: Text(), userId: Uuid() }, { additionalProperties: false }),
    { workspaceKey: "acme-shop", userId: USER_EXAMPLE.userId },
  ),
  "tenant.deleted": event(
    "A tenant is deleted (with the workspaces it had, each deleted before it)",
    Type.Object({ tenantKey: Text(), workspaceKeys: Type.Array(Text()) }, { additionalProperties: false }),
    { tenantKey: "acme", workspaceKeys: ["acme-shop", "acme-blog"] },
  ),
  "media.uploaded": event("A media asset is added", MediaView, {
    id: "6a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
    workspaceKey: "acme-shop",
    fileName: "logo.png",
    contentType: "image/png",
    size: 20_480,
    sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    uploadedBy: USER_EXAMPLE.userId,
    createdAtUtc: "2026-01-05T09:31:00.000Z",
  }),
  "media.deleted": event(
    "A media asset is removed",
    Type.Object({ id: Uuid(), workspaceKey: Text() }, { additionalProperties: false }),
    {
      id: "6a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
      workspaceKey: "acme-shop",
    },
  ),
  "job.dead-lettered": event(
    "A background job failed for good",
    Type.Object(
      {
        jobId: Text({ description: "the job's number, as text" }),
        type: Text(),
        workspaceKey: Nullable(Text()),
        attempts: Type.Integer(),
        lastError: Nullable(Text({ maxLength: 500 })),
        /** A failed delivery's subscription (only for `webhook.deliver` jobs). */
        subscriptionId: Type.Optional(Uuid()),
      },
      { additionalProperties: false },
    ),
    {
      jobId: "81234",
      type: "webhook.deliver",
      workspaceKey: "acme-shop",
      attempts: 5,
      lastError: "Error: receiver answered 500",
      subscriptionId: "3c2b1a09-8f7e-4d6c-9b5a-4a3b2c1d0e9f",
    },
  ),
  "webhook.disabled": event(
    "A webhook subscription was turned off: its receiver answered 410 Gone, or every delivery to it failed for too long",
    Type.Object(
      { subscriptionId: Uuid(), workspaceKey: Nullable(Text()), origin: Text(), reason: Text() },
      { additionalProperties: false },
    ),
    {
      subscriptionId: "3c2b1a09-8f7e-4d6c-9b5a-4a3b2c1d0e9f",
      workspaceKey: "acme-shop",
      origin: "https://hooks.example.com",
      reason: "the receiver answered 410 Gone",
    },
  ),
  "webhook.circuit-opened": event(
    "Deliveries to a webhook receiver are paused after repeated failures",
    Type.Object(
      {
        origin: Text(),
        workspaceKey: Nullable(Text()),
        failures: Type.Integer(),
        openForMs: Type.Integer(),
      },
      { additionalProperties: false },
    ),
    { origin: "https://hooks.example.com", workspaceKey: "acme-shop", failures: 5, openForMs: 60_000 },
  ),
  "plugin.refused": event(
    "An installed plugin failed signature re-verification",
    Type.Object({ pluginId: Text(), version: Text(), reason: Text() }, { additionalProperties: false }),
    { pluginId: "acme.reviews", version: "1.2.0", reason: "the package's signature no longer verifies" },
  ),
  "flow.notification": event(
    "A flow's notify action ran (rbac turns it into notifications)",
    Type.Object(
      {
        flowId: Uuid(),
        title: Text({ maxLength: 500 }),
        detail: Nullable(Text({ maxLength: 2_000 })),
        permission: Text({ description: "the key whose holders are notified" }),
        trigger: Type.Object(
          { event: Text(), eventId: Text() },
          { additionalProperties: false, description: "the event that ran the flow" },
        ),
      },
      { additionalProperties: false },
    ),
    {
      flowId: "5e4d3c2b-1a09-4f8e-8d7c-6b5a4f3e2d1c",
      title: "New user ada",
      detail: null,
      permission: "user.manage",
      trigger: { event: "user.created", eventId: "2f1e0d9c-8b7a-4c5d-9e6f-7a8b9c0d1e2f" },
    },
  ),
} as const;

export type PlatformEventName = keyof typeof platformEvents;

/** Each platform event's `data`, as a type. */
export type PlatformEventData = {
  [N in PlatformEventName]: Static<(typeof platformEvents)[N]["data"]>;
};

/** The publisher side of `@svc/bus`'s EventPublisher, as far as a platform event needs it. */
interface Publishes<O, R> {
  publish(eventName: string, workspaceKey: string | null, payload: unknown, options?: O): Promise<R>;
}

/** Publishes a platform event straight to the stream (no outbox), its data typed by its schema. */
export function publishPlatformEvent<N extends PlatformEventName, O, R>(
  publisher: Publishes<O, R>,
  eventName: N,
  workspaceKey: string | null,
  data: PlatformEventData[N],
  options?: O,
): Promise<R> {
  return publisher.publish(eventName, workspaceKey, data, options);
}
