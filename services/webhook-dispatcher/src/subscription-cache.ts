/**
 * The subscriptions deliveries read, kept in memory: every delivery reads its subscription, and at a
 * thousand deliveries a second that read was most of the dispatcher's statements. A copy is dropped when
 * PostgreSQL says the row changed (a trigger on every UPDATE and DELETE, migration 0013, so a change made
 * with plain SQL counts too) and after a minute in any case. While the dispatcher is not listening (before
 * its first connection, or between a lost connection and the next) nothing is kept: each delivery reads.
 *
 * A change reaches the deliveries that start after the notification arrives, normally within a
 * millisecond of the commit (on a loaded machine, the listening connection's backend can run later than
 * that); a delivery already running goes on with what it read, as it always did. The replica that makes
 * a change itself (an API call it answered, a delivery's health) drops its copy once the change commits
 * (`droppingOnWrite`), without waiting for the notification: its next delivery reads the change.
 */
import { afterCommit, type Db, isUuid, listenForNotifications, sql } from "@svc/db";
import type { Logger } from "@svc/observability";
import { growingLru } from "@svc/runtime";

export interface SubscriptionRow {
  id: string;
  target_url: string;
  secret_encrypted: string;
  /** A rotated secret's predecessor and when it stops signing (both null without one). */
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: Date | null;
  is_active: boolean;
  include_sensitive_data: boolean;
  workspace_key: string | null;
  disabled_at: Date | null;
  disabled_announced: boolean;
  disabled_reason: string | null;
  failing_since: Date | null;
  /** At most this many attempts start per second (null: no limit). */
  throttle_per_second: number | null;
  /** When it was last turned on again after being off (null: never off). */
  resumed_at: Date | null;
  /** Its custom headers, names and values, sealed (null: none). */
  headers_sealed: string | null;
  /** Its ed25519 private key (PKCS #8, base64), sealed (null: no `v1a,` signature). */
  ed25519_private_sealed: string | null;
}

export const SUBSCRIPTION_CHANGED_CHANNEL = "svc_webhook_subscription_changed";

export class SubscriptionCache {
  private readonly rows = growingLru<string, SubscriptionRow>(10_000, { ttl: 60_000 });
  /** Reads under way, so the deliveries that start together read a subscription once. */
  private readonly reading = new Map<string, Promise<SubscriptionRow | null>>();
  /** Counts the changes heard: a read that saw one begin while it ran is not kept. */
  private changes = 0;
  private listening = false;

  constructor(
    private readonly db: Db,
    /** Told of each change heard (`svc_webhook_subscription_changes_heard_total`). */
    private readonly onChange: () => void = () => undefined,
  ) {}

  /** The subscription as it is now (null: deleted, or no subscription has that id). */
  load(id: string): Promise<SubscriptionRow | null> {
    const kept = this.listening ? this.rows.get(id) : undefined;
    if (kept !== undefined) return Promise.resolve(kept);
    const pending = this.reading.get(id);
    if (pending !== undefined) return pending;
    const changesBefore = this.changes;
    const read = readSubscription(this.db, id).then(
      (row) => {
        if (this.reading.get(id) === read) this.reading.delete(id);
        if (row !== null && this.listening && this.changes === changesBefore) this.rows.set(id, row);
        return row;
      },
      (error: unknown) => {
        if (this.reading.get(id) === read) this.reading.delete(id);
        throw error;
      },
    );
    this.reading.set(id, read);
    return read;
  }

  /** PostgreSQL said a subscription changed: the next delivery reads it again. */
  changed(id: string): void {
    this.onChange();
    this.drop(id);
  }

  /**
   * `tables` whose `writes` (each taking a subscription's id first) drop this replica's copy of that
   * subscription once the write commits: at once outside a unit of work, after its COMMIT inside one (a
   * read between the write and its commit would still see the row before it).
   */
  droppingOnWrite<T extends object, K extends keyof T>(tables: T, writes: readonly K[]): T {
    const wrapped: T = { ...tables };
    for (const name of writes) {
      const write = tables[name] as unknown as (id: string, ...rest: unknown[]) => Promise<unknown>;
      const dropping = async (id: string, ...rest: unknown[]) => {
        const result = await write(id, ...rest);
        afterCommit(() => this.drop(id));
        return result;
      };
      wrapped[name] = dropping as T[K];
    }
    return wrapped;
  }

  private drop(id: string): void {
    this.changes++;
    this.rows.delete(id);
    // A read already under way may have seen the row before the change: later deliveries do not join it.
    this.reading.delete(id);
  }

  /** Listening (again, after a lost connection: what changed meanwhile was not heard) or not. */
  setListening(listening: boolean): void {
    this.changes++;
    this.rows.clear();
    this.reading.clear();
    this.listening = listening;
  }

  /** LISTENs for the trigger's notifications on a connection of its own. */
  listen(databaseUrl: string, log: Logger): { stop(): Promise<void> } {
    return listenForNotifications({
      databaseUrl,
      channel: SUBSCRIPTION_CHANGED_CHANNEL,
      applicationName: "webhook-dispatcher-subscriptions",
      log,
      onNotification: (id) => this.changed(id),
      onConnected: () => this.setListening(true),
      onDisconnected: () => this.setListening(false),
    });
  }
}

async function readSubscription(db: Db, id: string): Promise<SubscriptionRow | null> {
  // A job's id that is no UUID (written by hand) finds nothing rather than failing the statement.
  if (!isUuid(id)) return null;
  return db.maybeOne<SubscriptionRow>(sql`
    SELECT id, target_url, secret_encrypted, previous_secret_encrypted, previous_secret_expires_at,
           is_active, include_sensitive_data, workspace_key, disabled_at, disabled_announced,
           disabled_reason, failing_since, throttle_per_second, resumed_at, headers_sealed,
           ed25519_private_sealed
    FROM webhook_dispatcher.subscriptions WHERE id = ${id}`);
}
