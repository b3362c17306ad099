/**
 * What subscriptions and flows share: both are rows with a `workspace_key` (null: every workspace), an
 * `event_name` (an event's name or `*`), `is_active`, and `(created_at, id)` for newest-first paging.
 */
import { type Queries, type readPage, type Sql, sql } from "@svc/db";

import { patternsMatching } from "./patterns.js";

/** Rows of one workspace (`within`), or of all (null). */
export const inWorkspace = (within: string | null) =>
  sql`(${within}::text IS NULL OR workspace_key = ${within}::text)`;

/** One page of `table`, newest first by (created_at, id): of one workspace, or of all (`null`). */
export async function newestFirst<R extends { id: string }>(
  db: Queries,
  table: Sql,
  columns: Sql,
  workspaceKey: string | null,
  { limit, after }: ReturnType<typeof readPage>,
): Promise<Array<R & { created_at_us: string }>> {
  // The cursor keeps created_at to the microsecond: at millisecond precision rows created in the same
  // millisecond as the page's last one would be skipped.
  return db.any<R & { created_at_us: string }>(sql`
    SELECT ${columns},
           to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at_us
    FROM ${table}
    WHERE ${inWorkspace(workspaceKey)}
      AND (${after?.[0] ?? null}::timestamptz IS NULL
           OR (created_at, id) < (${after?.[0] ?? null}::timestamptz, ${after?.[1] ?? null}::uuid))
    ORDER BY created_at DESC, id DESC
    LIMIT ${limit + 1}`);
}

/**
 * For many (event name, workspace) pairs at once, in one statement (the matcher's: one round trip per
 * batch of events): the active subscriptions each pair reaches, and the active flows (id and actions) of
 * the pairs `flowPairs` names, each by pair index. A row matches when its pattern is one of
 * `patternsMatching(name)` (the name, or a prefix of it followed by `*`, ADR 0014) and it is the event's
 * workspace's or every workspace's: an equality join on the pattern, which each table's index serves.
 */
export async function matchingSubscriptionsAndFlows(
  db: Queries,
  pairs: ReadonlyArray<{ eventName: string; workspaceKey: string | null }>,
  flowPairs: ReadonlySet<number>,
): Promise<{
  subscriptions: Map<number, string[]>;
  flows: Map<number, Array<{ id: string; actions: unknown }>>;
}> {
  const expanded = pairs.flatMap((p, i) =>
    patternsMatching(p.eventName).map((pattern) => ({ ord: i + 1, pattern, ws: p.workspaceKey })),
  );
  const rows = await db.any<{ kind: "s" | "f"; ord: string; id: string; actions: unknown }>(sql`
    WITH e AS (
      SELECT * FROM unnest(${expanded.map((e) => e.ord)}::int[], ${expanded.map((e) => e.pattern)}::text[],
                           ${expanded.map((e) => e.ws)}::text[]) AS e(ord, pattern, ws))
    SELECT 's' AS kind, e.ord::text, t.id::text AS id, NULL::jsonb AS actions
    FROM e JOIN webhook_dispatcher.subscriptions t
      ON t.is_active AND t.event_name = e.pattern AND (t.workspace_key IS NULL OR t.workspace_key = e.ws)
    UNION ALL
    SELECT 'f', e.ord::text, t.id::text, t.actions
    FROM e JOIN webhook_dispatcher.flows t
      ON t.is_active AND t.event_name = e.pattern AND (t.workspace_key IS NULL OR t.workspace_key = e.ws)
    WHERE e.ord = ANY(${[...flowPairs].map((i) => i + 1)}::int[])`);
  const subscriptions = new Map<number, string[]>();
  const flows = new Map<number, Array<{ id: string; actions: unknown }>>();
  for (const row of rows) {
    const index = Number(row.ord) - 1;
    if (row.kind === "s") subscriptions.set(index, [...(subscriptions.get(index) ?? []), row.id]);
    else flows.set(index, [...(flows.get(index) ?? []), { id: row.id, actions: row.actions }]);
  }
  return { subscriptions, flows };
}
