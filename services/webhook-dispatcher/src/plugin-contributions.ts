/**
 * Installed plugins' sensitive fields (masked in webhook payloads, spec 6.4.3) and event names (which
 * join the event catalogue, so `matchesKnownEvent` turns true by itself, spec 2.3) — each with its plugin
 * id as `source`, removed when the plugin is uninstalled (issue 11, item 8).
 */
import type { PluginContribution } from "@svc/contracts";
import { type Db, sql, withRetry } from "@svc/db";

export async function applyPluginContributions(
  db: Db,
  plugins: readonly PluginContribution[],
): Promise<void> {
  const fields = plugins.flatMap((p) => p.sensitiveFields.map((name) => ({ name, source: p.pluginId })));
  const events = plugins.flatMap((p) => p.events.map((name) => ({ name, source: p.pluginId })));
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
      INSERT INTO webhook_dispatcher.event_catalog (event_name, source, description)
      SELECT n, s, 'Published by plugin ' || s
      FROM unnest(${events.map((e) => e.name)}::text[], ${events.map((e) => e.source)}::text[]) AS t(n, s)
      ON CONFLICT (event_name) DO NOTHING`);
    }),
  );
}
