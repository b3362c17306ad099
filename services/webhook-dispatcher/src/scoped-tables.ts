/**
 * What subscriptions and flows share: both are rows with a `workspace_key` (null: every workspace), an
 * `event_name` (an event's name or `*`), `is_active`, and `(created_at, id)` for newest-first paging.
 */
import { type Queries, type readPage, type Sql, sql } from "@svc/db";

import { patternsMatching } from "./patterns.js";

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
    WHERE (${workspaceKey}::text IS NULL OR workspace_key = ${workspaceKey}::text)
      AND (${after?.[0] ?? null}::timestamptz IS NULL
           OR (created_at, id) < (${after?.[0] ?? null}::timestamptz, ${after?.[1] ?? null}::uuid))
    ORDER BY created_at DESC, id DESC
    LIMIT ${limit + 1}`);
}

/**
 * For many (event name, workspace) pairs at once: the active rows of `table` each pair matches (their
 * pattern is one of `patternsMatching(name)`: the name, or a prefix of it followed by `*`, ADR 0014; in
 * the event's workspace or every workspace), as `columns` of `t`, by pair index. An equality join on the
 * row's pattern, which its index serves.
 */
export async function matchingMany<R>(
  db: Queries,
  table: Sql,
  columns: Sql,
  pairs: ReadonlyArray<{ eventName: string; workspaceKey: string | null }>,
): Promise<Map<number, R[]>> {
  const expanded = pairs.flatMap((p, i) =>
    patternsMatching(p.eventName).map((pattern) => ({ ord: i + 1, pattern, ws: p.workspaceKey })),
  );
  const rows = await db.any<R & { ord: string }>(sql`
    SELECT e.ord::text, ${columns}
    FROM unnest(${expanded.map((e) => e.ord)}::int[], ${expanded.map((e) => e.pattern)}::text[],
                ${expanded.map((e) => e.ws)}::text[]) AS e(ord, pattern, ws)
    JOIN ${table} t
      ON t.is_active AND t.event_name = e.pattern
     AND (t.workspace_key IS NULL OR t.workspace_key = e.ws)`);
  const out = new Map<number, R[]>();
  for (const { ord, ...rest } of rows) {
    const index = Number(ord) - 1;
    out.set(index, [...(out.get(index) ?? []), rest as R]);
  }
  return out;
}
