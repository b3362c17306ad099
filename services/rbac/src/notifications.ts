/**
 * Notifications. rbac follows five platform events with durable JetStream consumers
 * (one per event, so nothing published while rbac is down is lost, and a redelivery adds nothing) and
 * addresses each to the operators who can act on it:
 * - `job.dead-lettered` (the job reaper): holders of `webhook.manage` for webhook deliveries, else of
 *   `job.read`;
 * - `webhook.circuit-opened` and `webhook.disabled` (the webhook dispatcher): holders of `webhook.manage`;
 * - `plugin.refused` (the plugin registry, at re-verification): holders of `plugin.execute`;
 * - `flow.notification` (a flow's notify action): holders of the key the action names.
 * A holder is an active user whose global role grants the key (or `*`, or is superadmin) or, for an event
 * of a workspace, a member whose member roles there grant it. `GET /api/notifications` lists the caller's
 * own, unread first; `PUT /api/notifications/{id}/read` marks one read.
 */
import { randomUUID } from "node:crypto";

import type { NatsConnection } from "@nats-io/transport-node";
import { reachWorkspace } from "@svc/access";
import { followEvents } from "@svc/bus";
import type { RouteHandlerWith } from "@svc/contracts";
import { type Db, isUuid, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { NotFoundError } from "@svc/errors";
import type { Logger } from "@svc/observability";

import type { RbacRoutes } from "./deps.js";

interface Described {
  readonly key: string;
  readonly title: string;
  readonly detail: string | null;
}

type Data = Record<string, unknown>;
const KEY = /^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$/;
/** The event a flow's notify action publishes: its title and detail are the flow's author's text. */
const FLOW_NOTIFICATION = "flow.notification";
const text = (v: unknown) => (typeof v === "string" ? v : typeof v === "number" ? String(v) : "");

/** What each followed event means for an operator, and who can act on it. */
const KINDS: Record<string, (data: Data) => Described> = {
  "job.dead-lettered": (d) => ({
    key: text(d.type).startsWith("webhook.") ? "webhook.manage" : "job.read",
    title: `Job ${text(d.type)} #${text(d.jobId)} failed for good after ${text(d.attempts)} attempt(s)`,
    detail: typeof d.lastError === "string" ? d.lastError : null,
  }),
  "webhook.circuit-opened": (d) => ({
    key: "webhook.manage",
    title: `Webhook deliveries to ${text(d.origin)}${typeof d.workspaceKey === "string" ? ` from workspace ${d.workspaceKey}` : ""} are paused`,
    detail: `${text(d.failures)} failed deliveries in a row; deliveries are tried again after ${Math.round(Number(d.openForMs) / 1000)} s.`,
  }),
  "webhook.disabled": (d) => ({
    key: "webhook.manage",
    title: `A webhook subscription to ${text(d.origin)}${typeof d.workspaceKey === "string" ? ` in workspace ${d.workspaceKey}` : ""} was turned off`,
    detail: `${text(d.reason) || "its receiver asked for no more deliveries"}; subscription ${text(d.subscriptionId)}. Turn it on again with PUT /api/webhooks/{id}/activation?isActive=true.`,
  }),
  // A flow's notify action (webhook-dispatcher): its title and detail, for the holders of its key.
  [FLOW_NOTIFICATION]: (d) => ({
    key: typeof d.permission === "string" && KEY.test(d.permission) ? d.permission : "flow.manage",
    title: text(d.title) || "A flow ran",
    detail: typeof d.detail === "string" ? d.detail : null,
  }),
  "plugin.refused": (d) => ({
    key: "plugin.execute",
    title: `Plugin ${text(d.pluginId)} ${text(d.version)} was refused when it was verified again`,
    detail: typeof d.reason === "string" ? d.reason : null,
  }),
};

/**
 * The users who can act on an event: by their global role, or by their member roles in its workspace.
 * What a flow wrote about a workspace goes to that workspace's members only: a
 * workspace's flow never writes to the platform's operators.
 */
async function recipients(
  db: Queries,
  key: string,
  workspaceKey: string | null,
  membersOnly: boolean,
): Promise<string[]> {
  const rows = await db.any<{ id: string }>(sql`
    SELECT u.id FROM rbac.users u JOIN rbac.roles r ON r.name = u.global_role
    WHERE ${!membersOnly} AND u.is_active
      AND (r.name = 'superadmin' OR ${key} = ANY(r.permissions) OR '*' = ANY(r.permissions))
    UNION
    SELECT u.id FROM rbac.membership_roles mr
    JOIN rbac.users u ON u.id = mr.user_id JOIN rbac.roles r ON r.name = mr.role
    WHERE u.is_active AND mr.workspace_key = ${workspaceKey ?? ""} AND ${key} = ANY(r.permissions)`);
  return rows.map((r) => r.id);
}

/**
 * What one followed event means for the operators: the key its recipients hold, its title and detail (cut
 * to 500 and 2,000 characters), and whether only the members of its workspace get it (what a flow wrote
 * about a workspace); null for an event that is not followed.
 */
export function notificationOf(event: { eventName: string; workspaceKey: string | null; data: Data }): {
  readonly key: string;
  readonly title: string;
  readonly detail: string | null;
  readonly membersOnly: boolean;
} | null {
  const kind = KINDS[event.eventName];
  if (kind === undefined) return null;
  const d = kind(event.data);
  return {
    key: d.key,
    title: d.title.slice(0, 500),
    detail: d.detail?.slice(0, 2_000) ?? null,
    membersOnly: event.eventName === FLOW_NOTIFICATION && event.workspaceKey !== null,
  };
}

/** Records one event's notifications (idempotent by event id). */
export async function notify(
  db: Db,
  event: { eventName: string; eventId: string; workspaceKey: string | null; data: Data },
): Promise<number> {
  const n = notificationOf(event);
  if (n === null) return 0;
  const users = await recipients(db, n.key, event.workspaceKey, n.membersOnly);
  if (users.length === 0) return 0;
  const inserted = await db.any(sql`
    INSERT INTO rbac.notifications (id, user_id, event_id, kind, title, detail, workspace_key, data)
    SELECT id, u, ${event.eventId}, ${event.eventName}, ${n.title}, ${n.detail},
           ${event.workspaceKey}, ${JSON.stringify(event.data)}::jsonb
    FROM unnest(${users.map(() => randomUUID())}::uuid[], ${users}::uuid[]) AS t(id, u)
    ON CONFLICT (user_id, event_id) DO NOTHING
    RETURNING 1 AS one`);
  return inserted.length;
}

/**
 * Follows the events with one durable consumer each (made when missing: at start and after a NATS server
 * lost its store). A message is acknowledged once its notifications are recorded; a failure is
 * redelivered after 5 s.
 */
export async function followNotifications(
  nc: NatsConnection,
  db: Db,
  options: { stream: string; prefix: string; log: Logger },
): Promise<{ ensure: () => Promise<void>; stop: () => void }> {
  const followers = await Promise.all(
    Object.keys(KINDS).map((eventName) =>
      followEvents(
        nc,
        {
          ...options,
          durable: `${options.prefix}-rbac-notify-${eventName.replaceAll(".", "-")}`,
          events: eventName,
        },
        async (event) => void (await notify(db, event)),
      ),
    ),
  );
  return {
    ensure: async () => {
      for (const follower of followers) await follower.ensure();
    },
    stop: () => {
      for (const follower of followers) follower.stop();
    },
  };
}

/** A notification as its table holds it, with its read flag (0 or 1) for the inbox's order. */
export interface NotificationRow {
  id: string;
  kind: string;
  title: string;
  detail: string | null;
  workspace_key: string | null;
  data: unknown;
  created_at: Date;
  read_at: Date | null;
  read_flag: number;
}

// The read flag (0 or 1), the creation time, the id: each value typed, so a forged cursor is a 400.
const INBOX: Listing = { tag: "notifications", kinds: ["bigint", "timestamp", "uuid"] };

/**
 * What the inbox routes ask of the notification table: a user's own, and `within` the one workspace a
 * session sees (null: all of the user's).
 */
export interface InboxTables {
  /**
   * Unread first, then newest first by (created_at, id), after the page's cursor (read flag, time, id),
   * one more than the limit.
   */
  page(
    userId: string,
    within: string | null,
    unreadOnly: boolean,
    page: ReturnType<typeof readPage>,
  ): Promise<NotificationRow[]>;
  /** Marks it read (keeping the first time it was); null when it is not the user's within `within`. */
  markRead(id: string, userId: string, within: string | null): Promise<NotificationRow | null>;
}

const inWorkspace = (within: string | null) =>
  sql`(${within}::text IS NULL OR workspace_key = ${within}::text)`;

/** The notification table in PostgreSQL. */
export function inboxTables(db: Queries): InboxTables {
  return {
    page: (userId, within, unreadOnly, { limit, after }) =>
      db.any<NotificationRow>(sql`
        SELECT *, (read_at IS NOT NULL)::int AS read_flag FROM rbac.notifications
        WHERE user_id = ${userId} AND ${inWorkspace(within)}
          AND (${unreadOnly} = false OR read_at IS NULL)
          AND (${after === null}
            OR (read_at IS NOT NULL)::int > ${Number(after?.[0] ?? 0)}
            OR ((read_at IS NOT NULL)::int = ${Number(after?.[0] ?? 0)}
                AND (created_at, id) < (${after?.[1] ?? null}::timestamptz, ${after?.[2] ?? null}::uuid)))
        ORDER BY (read_at IS NOT NULL), created_at DESC, id DESC
        LIMIT ${limit + 1}`),
    markRead: (id, userId, within) =>
      db.maybeOne<NotificationRow>(sql`
        UPDATE rbac.notifications SET read_at = COALESCE(read_at, now())
        WHERE id = ${id} AND user_id::text = ${userId} AND ${inWorkspace(within)}
        RETURNING *, 1 AS read_flag`),
  };
}

export interface InboxDeps {
  readonly inbox: InboxTables;
}
type InboxHandler<K extends keyof RbacRoutes> = RouteHandlerWith<InboxDeps, RbacRoutes[K]>;

const view = (r: NotificationRow) => ({
  id: r.id,
  kind: r.kind,
  // Text a flow wrote is marked as such wherever it is shown.
  origin: r.kind === FLOW_NOTIFICATION ? ("flow" as const) : ("platform" as const),
  title: r.title,
  detail: r.detail,
  workspaceKey: r.workspace_key,
  data: r.data,
  createdAtUtc: r.created_at.toISOString(),
  readAtUtc: r.read_at?.toISOString() ?? null,
});

/**
 * Notifications stay in their workspace: a workspace session sees and marks only its workspace's
 * notifications; a platform session all of the user's own.
 */
export const listNotifications: InboxHandler<"notifications.list"> = async (deps, req) => {
  const user = req.principal.subject;
  const page = readPage(req.query, INBOX);
  // Only users have an inbox (an API key or an integration has none).
  if (!isUuid(user)) return { status: 200, body: { items: [], nextCursor: null } };
  const within = reachWorkspace(req.principal);
  const rows = await deps.inbox.page(user, within, req.query.unreadOnly === true, page);
  return {
    status: 200,
    body: toPage(
      rows,
      page.limit,
      INBOX,
      (r) => [String(r.read_flag), r.created_at.toISOString(), r.id],
      view,
    ),
  };
};

export const markRead: InboxHandler<"notifications.read"> = async (deps, req) => {
  const row = await deps.inbox.markRead(req.params.id, req.principal.subject, reachWorkspace(req.principal));
  if (row === null) throw new NotFoundError(`Notification '${req.params.id}' was not found.`);
  return { status: 200, body: view(row) };
};
