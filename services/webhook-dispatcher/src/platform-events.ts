/**
 * The event catalogue's `host` rows are the platform's own events, written from `platformEvents`
 * (`@svc/contracts`) when the dispatcher starts: an event added to that list (which its publishers need
 * before they can record it) is in the catalogue with no migration, a description changed there is
 * changed here, and an event taken out of the list leaves the catalogue.
 */
import { platformEvents } from "@svc/contracts";
import { type Db, sql, withRetry } from "@svc/db";

/** Writes the `host` rows from `events` and returns their names: the only events the platform publishes. */
export async function writePlatformEvents(
  db: Db,
  events: Readonly<Record<string, { readonly description: string }>> = platformEvents,
): Promise<ReadonlySet<string>> {
  const entries = Object.entries(events);
  const names = entries.map(([name]) => name);
  const descriptions = entries.map(([, e]) => e.description);
  // Replicas starting together write the same rows: a deadlock between them (40P01) is run again.
  await withRetry(() =>
    db.transaction(async (tx) => {
      await tx.query(sql`
        DELETE FROM webhook_dispatcher.event_catalog
        WHERE source = 'host' AND event_name <> ALL (${names}::text[])`);
      // The platform's name wins over a plugin's row of the same name (which is not its to publish).
      await tx.query(sql`
        INSERT INTO webhook_dispatcher.event_catalog (event_name, source, description)
        SELECT name, 'host', description FROM unnest(${names}::text[], ${descriptions}::text[]) AS e(name, description)
        ON CONFLICT (event_name) DO UPDATE
          SET source = 'host', description = EXCLUDED.description, schema = NULL, example = NULL
          WHERE (event_catalog.source, event_catalog.description) IS DISTINCT FROM ('host', EXCLUDED.description)`);
    }),
  );
  return new Set(names);
}
