/** Subscription management and matching of published events to subscriptions. */
import { randomUUID } from "node:crypto";

import { listWorkspace, reachCondition } from "@svc/access";
import type { Principal } from "@svc/bus";
import {
  type ReplyOfRoute,
  type RequestOfRoute,
  SUBSCRIPTION_PATTERN,
  type webhookRoutes,
} from "@svc/contracts";
import { type Db, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { NotFoundError, ValidationError, type Violation } from "@svc/errors";

import { isLiteralAddressRefused, type TargetPolicy } from "./http-client.js";
import { patternsMatching } from "./patterns.js";
import { matchingMany, newestFirst } from "./scoped-tables.js";
import type { SecretBox } from "./secrets.js";

export const EVENT_PATTERN = new RegExp(SUBSCRIPTION_PATTERN);
type Routes = typeof webhookRoutes;
/** Newest first by (created_at, id). */
const SUBSCRIPTIONS: Listing = { tag: "webhooks", kinds: ["timestamp", "uuid"] };
const SUBSCRIPTIONS_TABLE = sql`webhook_dispatcher.subscriptions`;

interface Row {
  id: string;
  workspace_key: string | null;
  event_name: string;
  target_url: string;
  is_active: boolean;
  include_sensitive_data: boolean;
  created_at: Date;
}

/**
 * Every pattern that matches some catalogue event (for `matchesKnownEvent`): the union of
 * `patternsMatching` over the catalogue, made once per answer, so each row is one lookup.
 */
export async function knownPatterns(db: Queries): Promise<ReadonlySet<string>> {
  const rows = await db.any<{ event_name: string }>(
    sql`SELECT event_name FROM webhook_dispatcher.event_catalog`,
  );
  return new Set(rows.flatMap((r) => patternsMatching(r.event_name)));
}

function view(row: Row, known: ReadonlySet<string>) {
  return {
    id: row.id,
    workspaceKey: row.workspace_key,
    eventName: row.event_name,
    targetUrl: row.target_url,
    isActive: row.is_active,
    includeSensitiveData: row.include_sensitive_data,
    createdAtUtc: row.created_at.toISOString(),
    // Computed on read, never stored.
    matchesKnownEvent: known.has(row.event_name),
  };
}

/** Which subscriptions a principal reaches: all for platform sessions, its workspace's otherwise. */
export const reach = (principal: Principal) =>
  reachCondition(principal, (key) => sql`workspace_key = ${key}`);

/**
 * What the body's schema cannot say about a target URL (its length and the other fields are checked by
 * the route's contract): an absolute http(s) URL without credentials, and no literal address webhooks may
 * not reach.
 */
export function targetUrlViolations(targetUrl: string, allowed?: TargetPolicy): Violation[] {
  let url: URL | undefined;
  try {
    url = new URL(targetUrl);
  } catch {
    url = undefined;
  }
  if (
    url === undefined ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.username ||
    url.password
  ) {
    return [
      {
        field: "/body/targetUrl",
        message: "is required and must be an absolute http(s) URL without credentials",
      },
    ];
  }
  if (allowed !== undefined && isLiteralAddressRefused(url, allowed)) {
    // Names are checked again on every connection; a literal address can be judged now.
    return [
      {
        field: "/body/targetUrl",
        message: "names an address webhooks may not reach (loopback, private, link-local or reserved)",
      },
    ];
  }
  return [];
}

export async function createSubscription(
  db: Db,
  secrets: SecretBox,
  allowed: TargetPolicy,
  req: RequestOfRoute<Routes["webhooks.create"]>,
): Promise<ReplyOfRoute<Routes["webhooks.create"]>> {
  const body = req.body;
  const violations = targetUrlViolations(body.targetUrl, allowed);
  if (violations.length > 0) throw new ValidationError(violations);
  // A workspace session subscribes its own workspace; naming another is as if it did not exist. A
  // platform session's subscription without a workspace covers every workspace.
  // A blank workspace key is `default`, never stored blank.
  const named = body.workspaceKey?.trim() === "" ? "default" : (body.workspaceKey ?? undefined);
  const workspaceKey = listWorkspace(req.principal, named) ?? null;
  const row = await db.one<Row>(sql`
    INSERT INTO webhook_dispatcher.subscriptions
      (id, workspace_key, event_name, target_url, secret_encrypted, include_sensitive_data, is_active)
    VALUES (${randomUUID()}, ${workspaceKey}, ${body.eventName}, ${body.targetUrl},
            ${secrets.seal(body.secret)}, ${body.includeSensitiveData === true}, ${body.isActive ?? true})
    RETURNING id, workspace_key, event_name, target_url, is_active, include_sensitive_data, created_at`);
  return {
    status: 201,
    body: view(row, await knownPatterns(db)),
    headers: { location: `/api/webhooks/${row.id}` },
  };
}

/** Paged newest first by (created_at, id); `cursor` is the opaque `nextCursor` of the previous page. */
export async function listSubscriptions(
  db: Db,
  req: RequestOfRoute<Routes["webhooks.list"]>,
): Promise<ReplyOfRoute<Routes["webhooks.list"]>> {
  const q = req.query;
  const page = readPage(q, SUBSCRIPTIONS);
  const requested = q.workspaceKey?.trim() === "" ? "default" : q.workspaceKey;
  const workspaceKey = listWorkspace(req.principal, requested) ?? null;
  const rows = await newestFirst<Row>(
    db,
    SUBSCRIPTIONS_TABLE,
    sql`id, workspace_key, event_name, target_url, is_active, include_sensitive_data, created_at`,
    workspaceKey,
    page,
  );
  const known = await knownPatterns(db);
  const body = toPage(
    rows,
    page.limit,
    SUBSCRIPTIONS,
    (last) => [last.created_at_us, last.id],
    (r) => view(r, known),
  );
  return { status: 200, body };
}

export async function setActivation(
  db: Db,
  req: RequestOfRoute<Routes["webhooks.activation"]>,
): Promise<ReplyOfRoute<Routes["webhooks.activation"]>> {
  const isActive = req.query.isActive;
  const row = await db.maybeOne<Row>(sql`
    UPDATE webhook_dispatcher.subscriptions SET is_active = ${isActive}, updated_at = now()
    WHERE id = ${req.params.id} AND ${reach(req.principal)}
    RETURNING id, workspace_key, event_name, target_url, is_active, include_sensitive_data, created_at`);
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 200, body: view(row, await knownPatterns(db)) };
}

export async function deleteSubscription(
  db: Db,
  req: RequestOfRoute<Routes["webhooks.delete"]>,
): Promise<ReplyOfRoute<Routes["webhooks.delete"]>> {
  const row = await db.maybeOne(sql`
    DELETE FROM webhook_dispatcher.subscriptions WHERE id = ${req.params.id} AND ${reach(req.principal)} RETURNING id`);
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 204 };
}

export async function eventCatalog(db: Db): Promise<ReplyOfRoute<Routes["events.catalog"]>> {
  const rows = await db.any<{ eventName: string; source: string; description: string }>(sql`
    SELECT event_name AS "eventName", source, description FROM webhook_dispatcher.event_catalog ORDER BY event_name`);
  return { status: 200, body: rows };
}

/**
 * For many (event name, workspace) pairs at once: the active subscriptions each reaches, by pair index.
 */
export async function matchingSubscriptionsMany(
  db: Queries,
  pairs: ReadonlyArray<{ eventName: string; workspaceKey: string | null }>,
): Promise<Map<number, string[]>> {
  const matches = await matchingMany<{ id: string }>(db, SUBSCRIPTIONS_TABLE, sql`t.id::text AS id`, pairs);
  return new Map([...matches].map(([index, rows]) => [index, rows.map((r) => r.id)]));
}
