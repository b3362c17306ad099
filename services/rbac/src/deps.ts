/** What rbac's followers and handlers share, and session revocation. */
import type { KV } from "@nats-io/kv";
import { REVOCATIONS_COMPLETE_KEY } from "@svc/access";
import type { Config } from "@svc/config";
import type { PlatformEventData, rbacRoutes, TenancyLookupReply, TenancyLookupRequest } from "@svc/contracts";
import { type Db, sql } from "@svc/db";
import type { Logger } from "@svc/observability";
import type { Outbox } from "@svc/outbox";

import type { TokenIssuer } from "./tokens.js";

export interface RbacDeps {
  readonly db: Db;
  readonly config: Config;
  readonly issuer: TokenIssuer;
  /** Events are recorded in the transaction of the change they describe, and relayed from there. */
  readonly outbox: Outbox<PlatformEventData>;
  readonly revoked: KV;
  readonly log: Logger;
  /** Tells every gateway that a role's grants changed (they drop what they cached). */
  readonly announceRoleChange: (role: string) => void;
  /** The plugins active and assigned in a workspace (their keys survive in its sessions). */
  readonly activePlugins: (workspaceKey: string) => ReadonlySet<string>;
  /** Which workspaces exist, their tenant and whether they (and their tenant) are active: the resolver's. */
  readonly tenancy: (request: TenancyLookupRequest) => Promise<TenancyLookupReply>;
}

export type RbacRoutes = typeof rbacRoutes;

export const ok = <T>(body: T, status = 200) => ({ status, body });
export const noContent = () => ({ status: 204 });

/**
 * Revokes sessions: first in the KV bucket every gateway watches, then marked in PostgreSQL. If a KV write
 * fails the request fails and the sessions are still unmarked, so a retry revokes them again; nothing is
 * ever marked revoked without the gateways having been told.
 */
export async function revoke(
  deps: Pick<RbacDeps, "db" | "revoked" | "log">,
  sessions: ReadonlyArray<{ id: string; expires_at: Date }>,
): Promise<void> {
  if (sessions.length === 0) return;
  await Promise.all(sessions.map((s) => deps.revoked.put(s.id, String(s.expires_at.getTime()))));
  await deps.db.query(
    sql`UPDATE rbac.sessions SET revoked_at = now() WHERE id = ANY(${sessions.map((s) => s.id)}::uuid[])`,
  );
  deps.log.info({ count: sessions.length }, "sessions revoked");
}

/**
 * Writes every revoked session that has not expired into the revocation bucket, then the mark that the
 * bucket is complete: run whenever the bucket is provisioned, so a bucket NATS lost and
 * made again empty is filled before any gateway trusts a token.
 */
export async function fillRevocations(
  db: RbacDeps["db"],
  kv: RbacDeps["revoked"],
  log: RbacDeps["log"],
): Promise<void> {
  const rows = await db.any<{ id: string; expires_at: Date }>(sql`
    SELECT id::text, expires_at FROM rbac.sessions WHERE revoked_at IS NOT NULL AND expires_at > now()`);
  for (let i = 0; i < rows.length; i += 100) {
    await Promise.all(rows.slice(i, i + 100).map((s) => kv.put(s.id, String(s.expires_at.getTime()))));
  }
  await kv.put(REVOCATIONS_COMPLETE_KEY, String(Date.now()));
  log.info({ count: rows.length }, "revocation bucket filled from rbac.sessions");
}
