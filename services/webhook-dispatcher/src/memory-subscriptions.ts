/**
 * For the handlers' unit tests: the subscription table in memory, answering as the SQL does.
 */
import type { NewSubscription, Row, SubscriptionChange, SubscriptionRepository } from "./subscriptions.js";

/** The tables' answers as the SQL gives them; `calls` counts every question asked. */
export class MemorySubscriptions implements SubscriptionRepository {
  readonly rows: Array<
    Row & { secretSealed: string; previousSealed: string | null; headersSealed: string | null }
  > = [];
  calls = 0;
  private clock = Date.parse("2026-11-26T10:00:00.000Z");

  async insert(s: NewSubscription): Promise<Row> {
    this.calls++;
    const row = {
      id: crypto.randomUUID(),
      workspace_key: s.workspaceKey,
      event_name: s.eventName,
      target_url: s.targetUrl,
      is_active: s.isActive,
      include_sensitive_data: s.includeSensitiveData,
      description: s.description,
      throttle_per_second: s.throttlePerSecond,
      header_names: [...(s.headers?.names ?? [])],
      headersSealed: s.headers?.sealed ?? null,
      ed25519_public_key: s.ed25519?.publicKey ?? null,
      created_at: new Date((this.clock += 1_000)),
      updated_at: new Date(this.clock),
      previous_secret_expires_at: null,
      secretSealed: s.secretSealed,
      previousSealed: null as string | null,
    };
    this.rows.push(row);
    return row;
  }

  async page(workspaceKey: string | null, page: { limit: number; after: string[] | null }) {
    this.calls++;
    const key = (r: Row) => [r.created_at.toISOString().replace("Z", "000Z"), r.id] as const;
    return this.rows
      .filter((r) => workspaceKey === null || r.workspace_key === workspaceKey)
      .map((r) => ({ ...r, created_at_us: key(r)[0] }))
      .sort((a, b) => (key(b).join() < key(a).join() ? -1 : 1))
      .filter((r) => page.after === null || key(r).join() < page.after.join())
      .slice(0, page.limit + 1);
  }

  async setActive(id: string, within: string | null, isActive: boolean) {
    this.calls++;
    const row = this.lookup(id, within);
    if (row !== undefined) row.is_active = isActive;
    return row ?? null;
  }

  async replace(id: string, within: string | null, c: SubscriptionChange) {
    this.calls++;
    const row = this.lookup(id, within);
    if (row === undefined) return null;
    // Left out, the custom headers stay only while the target does (as the SQL does).
    const headers =
      c.headers !== undefined
        ? { header_names: [...(c.headers?.names ?? [])], headersSealed: c.headers?.sealed ?? null }
        : row.target_url === c.targetUrl
          ? {}
          : { header_names: [], headersSealed: null };
    Object.assign(row, {
      event_name: c.eventName,
      target_url: c.targetUrl,
      include_sensitive_data: c.includeSensitiveData,
      description: c.description,
      throttle_per_second: c.throttlePerSecond,
      ...headers,
      ...(c.ed25519 === undefined ? {} : { ed25519_public_key: c.ed25519?.publicKey ?? null }),
      updated_at: new Date((this.clock += 1_000)),
      secretSealed: c.secretSealed ?? row.secretSealed,
    });
    return row;
  }

  async rotate(id: string, within: string | null, secretSealed: string, overlapSeconds: number) {
    this.calls++;
    const row = this.lookup(id, within);
    if (row === undefined) return null;
    Object.assign(row, {
      previousSealed: overlapSeconds > 0 ? row.secretSealed : null,
      previous_secret_expires_at: overlapSeconds > 0 ? new Date(this.clock + overlapSeconds * 1_000) : null,
      secretSealed,
      updated_at: new Date((this.clock += 1_000)),
    });
    return row;
  }

  async remove(id: string, within: string | null) {
    this.calls++;
    const row = this.lookup(id, within);
    if (row !== undefined) this.rows.splice(this.rows.indexOf(row), 1);
    return row !== undefined;
  }

  async knownPatterns() {
    return new Set(["user.created", "user.*"]);
  }

  /** The event catalogue's rows. */
  catalogRows: Array<{
    eventName: string;
    source: string;
    description: string;
    schema: unknown;
    example: unknown;
  }> = [];

  async catalog() {
    return this.catalogRows;
  }

  async find(id: string, within: string | null) {
    return this.lookup(id, within) ?? null;
  }

  private lookup(id: string, within: string | null) {
    return this.rows.find((r) => r.id === id && (within === null || r.workspace_key === within));
  }
}
