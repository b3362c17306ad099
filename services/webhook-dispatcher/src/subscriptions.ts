/** Subscription management (spec 4.2, 2.3) and matching of published events to subscriptions (6.2). */
import { randomUUID } from "node:crypto";

import type { Principal, RouteReply, RouteRequest } from "@svc/bus";
import { type Db, decodeCursor, encodeCursor, type Queries, sql } from "@svc/db";
import { NotFoundError, ValidationError, type Violation } from "@svc/errors";

import { isLiteralAddressRefused, type TargetPolicy } from "./http-client.js";
import type { SecretBox } from "./secrets.js";

export const EVENT_PATTERN = /^[\w.\-*]{1,120}$/;
const MAX_PAGE = 100;
const SUBSCRIPTIONS_CURSOR = "webhooks";

interface Row {
  id: string;
  workspace_key: string | null;
  event_name: string;
  target_url: string;
  is_active: boolean;
  include_sensitive_data: boolean;
  created_at: Date;
}

/** Spec 2.3: only `*` is a wildcard; everything else is literal. */
export function patternMatches(pattern: string, eventName: string): boolean {
  if (!pattern.includes("*")) return pattern === eventName;
  const regex = new RegExp(
    `^${pattern
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\-]/g, "\\$&"))
      .join(".*")}$`,
    "s", // `*` matches any character, line terminators included
  );
  return regex.test(eventName);
}

async function catalogNames(db: Queries): Promise<string[]> {
  return (
    await db.any<{ event_name: string }>(sql`SELECT event_name FROM webhook_dispatcher.event_catalog`)
  ).map((r) => r.event_name);
}

function view(row: Row, catalog: readonly string[]) {
  return {
    id: row.id,
    workspaceKey: row.workspace_key,
    eventName: row.event_name,
    targetUrl: row.target_url,
    isActive: row.is_active,
    includeSensitiveData: row.include_sensitive_data,
    createdAtUtc: row.created_at.toISOString(),
    // Computed on read, never stored (spec 2.3).
    matchesKnownEvent: catalog.some((name) => patternMatches(row.event_name, name)),
  };
}

/** Which subscriptions a principal reaches: all for platform sessions, its workspace's otherwise. */
function reach(principal: Principal) {
  if (principal.scope === "platform") return sql`TRUE`;
  if (principal.scope === "workspace" && principal.workspaceKey !== null)
    return sql`workspace_key = ${principal.workspaceKey}`;
  return sql`FALSE`;
}

export interface CreateBody {
  eventName?: unknown;
  targetUrl?: unknown;
  secret?: unknown;
  workspaceKey?: unknown;
  includeSensitiveData?: unknown;
}

/** Longest target URL stored (the column allows 2,048 characters). */
export const MAX_TARGET_URL = 2_048;

export function validateCreate(body: CreateBody, allowed?: TargetPolicy): Violation[] {
  const v: Violation[] = [];
  if (typeof body.eventName !== "string" || !EVENT_PATTERN.test(body.eventName)) {
    v.push({ field: "/body/eventName", message: "is required and must match ^[\\w.\\-*]{1,120}$" });
  }
  let url: URL | undefined;
  try {
    url = typeof body.targetUrl === "string" ? new URL(body.targetUrl) : undefined;
  } catch {
    url = undefined;
  }
  if (
    url === undefined ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.username ||
    url.password
  ) {
    v.push({
      field: "/body/targetUrl",
      message: "is required and must be an absolute http(s) URL without credentials",
    });
  } else if ((body.targetUrl as string).length > MAX_TARGET_URL) {
    v.push({ field: "/body/targetUrl", message: `must be at most ${MAX_TARGET_URL} characters` });
  } else if (allowed !== undefined && isLiteralAddressRefused(url, allowed)) {
    // Names are checked again on every connection; a literal address can be judged now.
    v.push({
      field: "/body/targetUrl",
      message: "names an address webhooks may not reach (loopback, private, link-local or reserved)",
    });
  }
  if (typeof body.secret !== "string" || body.secret.length === 0 || body.secret.length > 500) {
    v.push({ field: "/body/secret", message: "is required (1 to 500 characters)" });
  }
  if (
    body.workspaceKey !== undefined &&
    body.workspaceKey !== null &&
    typeof body.workspaceKey !== "string"
  ) {
    v.push({ field: "/body/workspaceKey", message: "must be a string or null" });
  }
  if (body.includeSensitiveData !== undefined && typeof body.includeSensitiveData !== "boolean") {
    v.push({ field: "/body/includeSensitiveData", message: "must be a boolean" });
  }
  return v;
}

export async function createSubscription(
  db: Db,
  secrets: SecretBox,
  allowed: TargetPolicy,
  req: RouteRequest<Record<string, string>, Record<string, never>, CreateBody>,
): Promise<RouteReply> {
  const body = req.body ?? {};
  const violations = validateCreate(body, allowed);
  if (violations.length > 0) throw new ValidationError(violations);
  const p = req.principal;
  let workspaceKey = (body.workspaceKey as string | null | undefined) ?? null;
  if (p.scope !== "platform") {
    // A workspace session subscribes its own workspace; naming another is as if it did not exist.
    if (workspaceKey !== null && workspaceKey !== p.workspaceKey)
      throw new NotFoundError(`Workspace '${workspaceKey}' was not found.`);
    workspaceKey = p.workspaceKey;
    if (workspaceKey === null) throw new NotFoundError("The session reaches no workspace.");
  }
  const row = await db.one<Row>(sql`
    INSERT INTO webhook_dispatcher.subscriptions
      (id, workspace_key, event_name, target_url, secret_encrypted, include_sensitive_data)
    VALUES (${randomUUID()}, ${workspaceKey}, ${body.eventName}, ${body.targetUrl},
            ${secrets.seal(body.secret as string)}, ${body.includeSensitiveData === true})
    RETURNING id, workspace_key, event_name, target_url, is_active, include_sensitive_data, created_at`);
  return {
    status: 201,
    body: view(row, await catalogNames(db)),
    headers: { location: `/api/webhooks/${row.id}` },
  };
}

/** Paged newest first by (created_at, id); `cursor` is the opaque `nextCursor` of the previous page. */
export async function listSubscriptions(
  db: Db,
  req: RouteRequest<Record<string, string>, { workspaceKey?: string; limit?: number; cursor?: string }>,
): Promise<RouteReply> {
  const q = req.query ?? {};
  const limit = q.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new ValidationError([
      { field: "/query/limit", message: `must be an integer from 1 to ${MAX_PAGE}` },
    ]);
  }
  let after: { at: string; id: string } | null = null;
  if (q.cursor !== undefined) {
    const values = decodeCursor(q.cursor, SUBSCRIPTIONS_CURSOR, ["timestamp", "uuid"]);
    if (values === null)
      throw new ValidationError([{ field: "/query/cursor", message: "is not a cursor this API issued" }]);
    after = { at: values[0] as string, id: values[1] as string };
  }
  const workspaceKey =
    q.workspaceKey === undefined ? null : q.workspaceKey.trim() === "" ? "default" : q.workspaceKey;
  const rows = await db.any<Row & { created_at_us: string }>(sql`
    SELECT id, workspace_key, event_name, target_url, is_active, include_sensitive_data, created_at,
           to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at_us
    FROM webhook_dispatcher.subscriptions
    WHERE ${reach(req.principal)}
      AND (${workspaceKey}::text IS NULL OR workspace_key = ${workspaceKey}::text)
      AND (${after?.at ?? null}::timestamptz IS NULL
           OR (created_at, id) < (${after?.at ?? null}::timestamptz, ${after?.id ?? null}::uuid))
    ORDER BY created_at DESC, id DESC
    LIMIT ${limit + 1}`);
  const catalog = await catalogNames(db);
  const items = rows.slice(0, limit).map((r) => view(r, catalog));
  const last = rows[limit - 1];
  // The cursor keeps created_at to the microsecond: at millisecond precision rows created in the same
  // millisecond as the page's last one would be skipped.
  const nextCursor =
    rows.length > limit && last ? encodeCursor(SUBSCRIPTIONS_CURSOR, [last.created_at_us, last.id]) : null;
  return { status: 200, body: { items, nextCursor } };
}

export async function setActivation(
  db: Db,
  req: RouteRequest<{ id: string }, { isActive?: boolean | string }>,
): Promise<RouteReply> {
  const raw = req.query?.isActive;
  const isActive =
    raw === true || raw === "true" ? true : raw === false || raw === "false" ? false : undefined;
  if (isActive === undefined)
    throw new ValidationError([{ field: "/query/isActive", message: "is required: true or false" }]);
  const row = await db.maybeOne<Row>(sql`
    UPDATE webhook_dispatcher.subscriptions SET is_active = ${isActive}, updated_at = now()
    WHERE id = ${req.params.id} AND ${reach(req.principal)}
    RETURNING id, workspace_key, event_name, target_url, is_active, include_sensitive_data, created_at`);
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 200, body: view(row, await catalogNames(db)) };
}

export async function deleteSubscription(db: Db, req: RouteRequest<{ id: string }>): Promise<RouteReply> {
  const row = await db.maybeOne(sql`
    DELETE FROM webhook_dispatcher.subscriptions WHERE id = ${req.params.id} AND ${reach(req.principal)} RETURNING id`);
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 204 };
}

export async function eventCatalog(db: Db): Promise<RouteReply> {
  const rows = await db.any(sql`
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
  const rows = await db.any<{ ord: string; id: string }>(sql`
    SELECT e.ord::text, s.id::text
    FROM unnest(${pairs.map((p) => p.eventName)}::text[], ${pairs.map((p) => p.workspaceKey)}::text[])
      WITH ORDINALITY AS e(name, ws, ord)
    JOIN webhook_dispatcher.subscriptions s
      ON s.is_active AND (s.event_name = e.name OR s.event_name = '*')
     AND (s.workspace_key IS NULL OR s.workspace_key = e.ws)`);
  const out = new Map<number, string[]>();
  for (const r of rows) {
    const index = Number(r.ord) - 1;
    out.set(index, [...(out.get(index) ?? []), r.id]);
  }
  return out;
}
