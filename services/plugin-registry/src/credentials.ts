/**
 * NATS credentials for external plugin backends (docs/wire-contract.md): an operator
 * issues, lists and revokes them; each is a NATS user minted by the registry's plugin signing key with
 * exactly what an activation's user has (`pluginPermissions`: the plugin's route subject in its queue
 * group, its inbox, the events its registry.json declares). The seed is shown once and never stored.
 *
 * nats-server 2.9's memory resolver cannot be told of one revoked user without the account being re-signed
 * by the operator, which the registry does not hold: a revoked credential is marked so (listed, audited)
 * and keeps working until it expires. Hence a lifetime of days by default, and the operator guide's
 * immediate cut-off: replacing the plugin signing key.
 *
 * The routes ask a `CredentialTables` port (`credentialTables` is the PostgreSQL one), so their rules are
 * unit-tested with the tables in memory and a minter of the test's.
 */
import { randomUUID } from "node:crypto";

import { type Db, sql } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import { pluginInboxPrefix } from "@svc/runtime";
import { eventsSubject, pluginHttpSubject, pluginQueueGroup } from "@svc/wire-contract";

import {
  audit,
  type AuditTable,
  findPlugin,
  type HandlerWith,
  lockedPlugin,
  type PluginRow,
} from "./common.js";
import type { PluginCredentials } from "./runtime/plugin-credentials.js";

/** One issued credential as stored (its seed never is). */
export interface CredentialRow {
  credential_id: string;
  plugin_id: string;
  name: string | null;
  public_key: string;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

/** What the credential routes ask of the registry's tables. */
export interface CredentialTables extends AuditTable {
  /** The installed plugin (null: not installed). */
  plugin(pluginId: string): Promise<Pick<PluginRow, "version" | "registry"> | null>;
  /** Records an issued credential under the plugin's lock; null when the plugin is no longer installed. */
  record(entry: {
    readonly credentialId: string;
    readonly pluginId: string;
    readonly name: string | null;
    readonly publicKey: string;
    readonly createdBy: string;
    readonly expiresAt: Date;
  }): Promise<CredentialRow | null>;
  /** The plugin's credentials, newest first. */
  list(pluginId: string): Promise<CredentialRow[]>;
  /** Marks the credential revoked (the first time counts); null when the plugin has no such credential. */
  revoke(pluginId: string, credentialId: string): Promise<CredentialRow | null>;
}

export interface CredentialDeps {
  readonly credentials: Pick<PluginCredentials, "minting" | "mint">;
  readonly prefix: string;
  readonly tables: CredentialTables;
}
type Handler<
  K extends "plugins.credentials.issue" | "plugins.credentials.list" | "plugins.credentials.revoke",
> = HandlerWith<CredentialDeps, K>;

/** A week: long enough for a deployment to rotate by hand, short enough that a revocation ends. */
export const DEFAULT_TTL_SECONDS = 7 * 24 * 3_600;

/** The PostgreSQL credential tables. */
export function credentialTables(db: Db): CredentialTables {
  return {
    plugin: (pluginId) => findPlugin(db, pluginId),
    record: (e) =>
      db.transaction(async (tx) => {
        // Installed still (an uninstall may have run meanwhile).
        if ((await lockedPlugin(tx, e.pluginId)) === null) return null;
        return tx.one<CredentialRow>(sql`
          INSERT INTO plugin_registry.nats_credentials
            (credential_id, plugin_id, name, public_key, created_by, expires_at)
          VALUES (${e.credentialId}, ${e.pluginId}, ${e.name}, ${e.publicKey}, ${e.createdBy}, ${e.expiresAt})
          RETURNING *`);
      }),
    list: (pluginId) =>
      db.any<CredentialRow>(sql`
        SELECT * FROM plugin_registry.nats_credentials WHERE plugin_id = ${pluginId}
        ORDER BY created_at DESC, credential_id`),
    revoke: (pluginId, credentialId) =>
      db.maybeOne<CredentialRow>(sql`
        UPDATE plugin_registry.nats_credentials SET revoked_at = coalesce(revoked_at, now())
        WHERE plugin_id = ${pluginId} AND credential_id = ${credentialId}
        RETURNING *`),
    audit: (principal, action, plugin, error) => audit(db, principal, action, plugin, error),
  };
}

const viewOf = (row: CredentialRow) => ({
  credentialId: row.credential_id,
  pluginId: row.plugin_id,
  name: row.name,
  publicKey: row.public_key,
  createdBy: row.created_by,
  createdAtUtc: row.created_at.toISOString(),
  expiresAtUtc: row.expires_at.toISOString(),
  revokedAtUtc: row.revoked_at?.toISOString() ?? null,
});

const notInstalled = (pluginId: string) => new NotFoundError(`Plugin '${pluginId}' is not installed.`);

export const issue: Handler<"plugins.credentials.issue"> = async (deps, req) => {
  const id = req.params.id;
  try {
    if (!deps.credentials.minting) {
      throw new ConflictError(
        "Issuing plugin credentials needs decentralized NATS auth: set NATS_PLUGIN_SIGNING_KEY_FILE and NATS_PLUGIN_ACCOUNT on the plugin registry (docs/operator-guide.md, Securing NATS).",
      );
    }
    const plugin = await deps.tables.plugin(id);
    if (plugin === null) throw notInstalled(id);
    if (plugin.registry.runtime !== "external") {
      throw new ConflictError(
        `Plugin '${id}' runs in the platform's runtime, whose processes get credentials of their own at each activation: credentials are issued for external backends only (registry.json "runtime": "external").`,
      );
    }
    const events = plugin.registry.events ?? [];
    const ttl = req.body.ttlSeconds ?? DEFAULT_TTL_SECONDS;
    const credentialId = randomUUID();
    const minted = await deps.credentials.mint(id, events, ttl, `plugin:${id}:${credentialId}`);
    const row = await deps.tables.record({
      credentialId,
      pluginId: id,
      name: req.body.name ?? null,
      publicKey: minted.publicKey,
      createdBy: req.principal.subject,
      expiresAt: new Date(minted.expiresAt),
    });
    if (row === null) throw notInstalled(id);
    await deps.tables.audit(req.principal, `credentials issue ${credentialId}`, {
      id,
      version: plugin.version,
    });
    return {
      status: 201,
      body: {
        ...viewOf(row),
        creds: minted.creds,
        subjects: {
          serve: pluginHttpSubject(deps.prefix, id),
          queue: pluginQueueGroup(id),
          inboxPrefix: pluginInboxPrefix(id),
          publish: events.map((e) => eventsSubject(deps.prefix, e)),
        },
      },
    };
  } catch (error) {
    await deps.tables.audit(req.principal, "credentials issue", { id }, error);
    throw error;
  }
};

export const list: Handler<"plugins.credentials.list"> = async (deps, req) => {
  const rows = await deps.tables.list(req.params.id);
  if (rows.length === 0 && (await deps.tables.plugin(req.params.id)) === null)
    throw notInstalled(req.params.id);
  return { status: 200, body: rows.map(viewOf) };
};

export const revoke: Handler<"plugins.credentials.revoke"> = async (deps, req) => {
  const { id, credentialId } = req.params;
  const row = await deps.tables.revoke(id, credentialId);
  if (row === null) throw new NotFoundError(`Plugin '${id}' has no credential '${credentialId}'.`);
  await deps.tables.audit(req.principal, `credentials revoke ${credentialId}`, { id });
  return { status: 204 };
};
