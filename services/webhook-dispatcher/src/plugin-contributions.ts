/**
 * Installed plugins' sensitive fields (masked in webhook payloads) and event names (which join the event
 * catalogue, so `matchesKnownEvent` turns true by itself) — each with its plugin id as `source`, removed
 * when the plugin is uninstalled.
 */
import type { PluginContribution } from "@svc/contracts";
import { type Db, sql, withRetry } from "@svc/db";

export async function applyPluginContributions(
  db: Db,
  plugins: readonly PluginContribution[],
): Promise<void> {
  const fields = plugins.flatMap((p) => p.sensitiveFields.map((name) => ({ name, source: p.pluginId })));
  const events = plugins.flatMap((p) => {
    const described = new Map(p.eventSchemas.map((e) => [e.eventName, e]));
    return p.events.map((name) => {
      const d = described.get(name);
      return {
        name,
        source: p.pluginId,
        description: d?.description ?? `Published by plugin ${p.pluginId}`,
        schema: d === undefined ? null : JSON.stringify(d.schema),
        // `undefined` (no example) is stored as NULL; an example that is JSON null, as 'null'.
        example: d === undefined || !("example" in d) ? null : JSON.stringify(d.example ?? null),
      };
    });
  });
  const builtIn = sql`source IN ('baseline', 'host')`;
  // Replicas apply the same set at the same moment: a deadlock between them (40P01) is run again.
  await withRetry(() =>
    db.transaction(async (tx) => {
      await tx.query(sql`
      DELETE FROM webhook_dispatcher.sensitive_fields
      WHERE NOT ${builtIn}
        AND (field_name, source) NOT IN (SELECT * FROM unnest(${fields.map((f) => f.name)}::text[], ${fields.map((f) => f.source)}::text[]))`);
      await tx.query(sql`
      INSERT INTO webhook_dispatcher.sensitive_fields (field_name, source)
      SELECT * FROM unnest(${fields.map((f) => f.name)}::text[], ${fields.map((f) => f.source)}::text[])
      ON CONFLICT DO NOTHING`);
      await tx.query(sql`
      DELETE FROM webhook_dispatcher.event_catalog
      WHERE NOT ${builtIn}
        AND (event_name, source) NOT IN (SELECT * FROM unnest(${events.map((e) => e.name)}::text[], ${events.map((e) => e.source)}::text[]))`);
      await tx.query(sql`
      INSERT INTO webhook_dispatcher.event_catalog (event_name, source, description, schema, example)
      SELECT n, s, d, sc::jsonb, ex::jsonb
      FROM unnest(${events.map((e) => e.name)}::text[], ${events.map((e) => e.source)}::text[],
                  ${events.map((e) => e.description)}::text[], ${events.map((e) => e.schema)}::text[],
                  ${events.map((e) => e.example)}::text[]) AS t(n, s, d, sc, ex)
      -- A plugin's update brings its new descriptions and schemas; another source's row is never taken.
      ON CONFLICT (event_name) DO UPDATE
        SET description = EXCLUDED.description, schema = EXCLUDED.schema, example = EXCLUDED.example
        WHERE event_catalog.source = EXCLUDED.source
          AND (event_catalog.description, event_catalog.schema, event_catalog.example)
              IS DISTINCT FROM (EXCLUDED.description, EXCLUDED.schema, EXCLUDED.example)`);
    }),
  );
}

/**
 * Installed plugins' events: which plugin declares each, and which workspaces may raise it (those whose
 * chain holds the plugin while it is entitled there, the contributions' `workspaces`). A plugin or a flow
 * of a workspace publishes a plugin's event only there; a platform flow or a platform-wide event,
 * anywhere the plugin is installed. Follows the contributions; `viewAt` is when the view was asked for.
 */
export class PluginEventScopes {
  private scopes = new Map<string, { readonly pluginId: string; readonly workspaces: ReadonlySet<string> }>();
  /** When the registry was asked for the view applied last (epoch ms; 0: none yet). */
  viewAt = 0;

  apply(plugins: readonly PluginContribution[], requestedAt = Date.now()): void {
    const next = new Map<string, { pluginId: string; workspaces: ReadonlySet<string> }>();
    for (const p of plugins) {
      const workspaces = new Set(p.workspaces);
      for (const name of p.events) next.set(name, { pluginId: p.pluginId, workspaces });
    }
    this.scopes = next;
    this.viewAt = Math.max(this.viewAt, requestedAt);
  }

  /** The installed plugin that declares `eventName`, if any. */
  pluginOf(eventName: string): string | undefined {
    return this.scopes.get(eventName)?.pluginId;
  }

  /** Whether `eventName` is a plugin's event raised into `workspaceKey` (null: platform-wide) where it may be. */
  mayRaise(eventName: string, workspaceKey: string | null): boolean {
    const scope = this.scopes.get(eventName);
    if (scope === undefined) return false;
    return workspaceKey === null || scope.workspaces.has(workspaceKey);
  }
}
