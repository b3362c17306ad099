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
 */
import { randomUUID } from "node:crypto";

import { sql } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import { pluginInboxPrefix } from "@svc/runtime";
import { eventsSubject, pluginHttpSubject, pluginQueueGroup } from "@svc/wire-contract";

import { audit, type HandlerWith, lockPlugin, type PluginDeps, type PluginRow } from "./common.js";
import type { PluginCredentials } from "./runtime/plugin-credentials.js";

export interface CredentialDeps extends PluginDeps {
  readonly credentials: PluginCredentials;
  readonly prefix: string;
}
type Handler<
  K extends "plugins.credentials.issue" | "plugins.credentials.list" | "plugins.credentials.revoke",
> = HandlerWith<CredentialDeps, K>;

/** A week: long enough for a deployment to rotate by hand, short enough that a revocation ends. */
const DEFAULT_TTL_SECONDS = 7 * 24 * 3_600;

interface CredentialRow {
  credential_id: string;
  plugin_id: string;
  name: string | null;
  public_key: string;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
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

async function installed(deps: CredentialDeps, pluginId: string): Promise<PluginRow> {
  const row = await deps.db.maybeOne<PluginRow>(
    sql`SELECT * FROM plugin_registry.plugins WHERE plugin_id = ${pluginId}`,
  );
  if (row === null) throw new NotFoundError(`Plugin '${pluginId}' is not installed.`);
  return row;
}

export const issue: Handler<"plugins.credentials.issue"> = async (deps, req) => {
  const id = req.params.id;
  try {
    if (!deps.credentials.minting) {
      throw new ConflictError(
        "Issuing plugin credentials needs decentralized NATS auth: set NATS_PLUGIN_SIGNING_KEY_FILE and NATS_PLUGIN_ACCOUNT on the plugin registry (docs/operator-guide.md, Securing NATS).",
      );
    }
    const plugin = await installed(deps, id);
    if (plugin.registry.runtime !== "external") {
      throw new ConflictError(
        `Plugin '${id}' runs in the platform's runtime, whose processes get credentials of their own at each activation: credentials are issued for external backends only (registry.json "runtime": "external").`,
      );
    }
    const events = plugin.registry.events ?? [];
    const ttl = req.body.ttlSeconds ?? DEFAULT_TTL_SECONDS;
    const credentialId = randomUUID();
    const minted = await deps.credentials.mint(id, events, ttl, `plugin:${id}:${credentialId}`);
    const row = await deps.db.transaction(async (tx) => {
      await lockPlugin(tx, id);
      // Installed still (an uninstall may have run meanwhile).
      await installed({ ...deps, db: tx } as CredentialDeps, id);
      return tx.one<CredentialRow>(sql`
        INSERT INTO plugin_registry.nats_credentials
          (credential_id, plugin_id, name, public_key, created_by, expires_at)
        VALUES (${credentialId}, ${id}, ${req.body.name ?? null}, ${minted.publicKey},
                ${req.principal.subject}, ${new Date(minted.expiresAt)})
        RETURNING *`);
    });
    await audit(deps.db, req.principal, `credentials issue ${credentialId}`, { id, version: plugin.version });
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
    await audit(deps.db, req.principal, "credentials issue", { id }, error);
    throw error;
  }
};

export const list: Handler<"plugins.credentials.list"> = async (deps, req) => {
  const rows = await deps.db.any<CredentialRow>(sql`
    SELECT * FROM plugin_registry.nats_credentials WHERE plugin_id = ${req.params.id}
    ORDER BY created_at DESC, credential_id`);
  if (rows.length === 0) await installed(deps, req.params.id);
  return { status: 200, body: rows.map(viewOf) };
};

export const revoke: Handler<"plugins.credentials.revoke"> = async (deps, req) => {
  const { id, credentialId } = req.params;
  const row = await deps.db.maybeOne<CredentialRow>(sql`
    UPDATE plugin_registry.nats_credentials SET revoked_at = coalesce(revoked_at, now())
    WHERE plugin_id = ${id} AND credential_id = ${credentialId}
    RETURNING *`);
  if (row === null) throw new NotFoundError(`Plugin '${id}' has no credential '${credentialId}'.`);
  await audit(deps.db, req.principal, `credentials revoke ${credentialId}`, { id });
  return { status: 204 };
};
