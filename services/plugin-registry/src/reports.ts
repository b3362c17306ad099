/**
 * What the registry reports about installed plugins: the signature report, signers, contract support
 * and compatibility, the audit, the contributions other services follow, and rehydration at start.
 */
import { reachWorkspace } from "@svc/access";
import { type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { SvcError } from "@svc/errors";
import { HOST_DEPENDENCY, PERMISSIONS_PROPERTY, PLUGIN_CONTRACT } from "@svc/plugin-package";
import { growingLru } from "@svc/runtime";
import semver from "semver";

import {
  allPlugins,
  audit,
  type HandlerWith,
  type PluginDeps,
  type PluginHandler,
  type PluginRow,
  reasonOf,
  view,
} from "./common.js";
import { chainEntitled } from "./entitlements.js";
import { openPackage, storedPackage } from "./packages.js";

/** A lifecycle audit entry. */
export interface AuditRow {
  id: string;
  at: Date;
  actor: string;
  actor_name: string | null;
  action: string;
  plugin_id: string | null;
  version: string | null;
  outcome: "succeeded" | "failed";
  reason: string | null;
}

/** What the reports ask of the registry's tables. */
export interface ReportTables {
  /** Every installed plugin. */
  plugins(): Promise<PluginRow[]>;
  /** Each plugin's workspaces whose chain holds it while it is entitled there, by plugin id. */
  entitledChains(): Promise<ReadonlyMap<string, readonly string[]>>;
  /**
   * Audit entries newest first by id, after the page's cursor, one more than the limit: those about one
   * workspace (null: all) and one plugin (undefined: any).
   */
  audit(
    workspaceKey: string | null,
    pluginId: string | undefined,
    page: ReturnType<typeof readPage>,
  ): Promise<AuditRow[]>;
}

/** The registry's tables in PostgreSQL. */
export function reportTables(db: Queries): ReportTables {
  return {
    plugins: () => allPlugins(db),
    entitledChains: async () => {
      // Only chains the plugin is still entitled to count (a withdrawn or expired grant drops it here).
      const chains = await db.any<{ plugin_id: string; workspaces: string[] }>(sql`
        SELECT w.plugin_id, array_agg(w.workspace_key ORDER BY w.workspace_key) AS workspaces
        FROM plugin_registry.workspace_plugins w JOIN plugin_registry.plugins p USING (plugin_id)
        WHERE ${chainEntitled} GROUP BY w.plugin_id`);
      return new Map(chains.map((c) => [c.plugin_id, c.workspaces]));
    },
    audit: (only, pluginId, { limit, after }) =>
      db.any<AuditRow>(sql`
        SELECT a.id::text AS id, at, actor, actor_name, action, plugin_id, version, outcome, reason
        FROM plugin_registry.audit a
        WHERE (${after?.[0] ?? null}::bigint IS NULL OR a.id < ${after?.[0] ?? null}::bigint)
          AND (${only}::text IS NULL OR a.workspace_key = ${only})
          AND (${pluginId ?? null}::text IS NULL OR a.plugin_id = ${pluginId ?? null})
        -- a.id, the bigint column: the text output column would sort "9" before "10".
        ORDER BY a.id DESC LIMIT ${limit + 1}`),
  };
}

type Verified = { signed: boolean; failure?: undefined } | { failure: SvcError };

/**
 * Verification results by package hash and trust settings: the report unpacked and
 * re-verified every stored package on each call. A package's bytes never change under its hash, so the
 * answer changes only with the trust settings, which are part of the key.
 */
const verified = growingLru<string, Verified>(5_000);

function trustKey(deps: PluginDeps, sha256: string): string {
  const s = deps.settings;
  return JSON.stringify([
    sha256,
    s.trustedSigners,
    s.revokedSignerFingerprints,
    s.revokedContentHashes,
    s.allowUnsignedPlugins,
    s.pluginMaxFiles,
    s.pluginMaxExpandedBytes,
  ]);
}

/** A stored package's verification with the current trust settings: its signedness, or why not (cached). */
async function verifyStored(deps: PluginDeps, row: PluginRow): Promise<Verified> {
  const key = trustKey(deps, row.package_sha256);
  const known = verified.get(key);
  if (known !== undefined) return known;
  const result = await verifyStoredNow(deps, row);
  verified.set(key, result);
  return result;
}

async function verifyStoredNow(deps: PluginDeps, row: PluginRow): Promise<Verified> {
  try {
    const opened = await deps.metrics.time("verify", async () =>
      openPackage(await storedPackage(deps.store, row.package_sha256), {
        settings: deps.settings,
        hostVersion: deps.hostVersion,
        trustOnly: true,
      }),
    );
    return { signed: opened.signed };
  } catch (error) {
    if (!(error instanceof SvcError)) throw error;
    return { failure: error };
  }
}

/**
 * Every installed plugin's stored package verified with the current trust settings (a package is
 * unpacked and verified once per hash and trust settings; the re-verification at every load is separate).
 */
export const signatureReport: HandlerWith<
  PluginDeps & { reports: ReportTables },
  "plugins.signature-report"
> = async (deps) => {
  const items = [];
  for (const row of await deps.reports.plugins()) {
    const result = await verifyStored(deps, row);
    items.push({
      pluginId: row.plugin_id,
      version: row.version,
      status:
        result.failure !== undefined
          ? ("invalid" as const)
          : result.signed
            ? ("valid" as const)
            : ("unsigned" as const),
      code: result.failure === undefined ? null : reasonOf(result.failure),
      reason: result.failure?.message ?? null,
    });
  }
  return { status: 200, body: { checkedAtUtc: new Date().toISOString(), items } };
};

export const trustedSigners: PluginHandler<"signers.list"> = async (deps) => ({
  status: 200,
  body: deps.settings.trustedSigners.map((s) => ({
    publisherId: s.publisherId,
    displayName: s.displayName,
    fingerprint: s.fingerprint,
    source: "configuration",
    revoked: deps.settings.revokedSignerFingerprints.includes(s.fingerprint),
  })),
});

export const contractSupport: PluginHandler<"contracts.support"> = async (deps) => ({
  status: 200,
  body: {
    hostVersion: deps.hostVersion,
    contractVersion: PLUGIN_CONTRACT.current,
    supportedContractVersions: PLUGIN_CONTRACT.supported,
    hostDependencyKey: HOST_DEPENDENCY,
    permissionsProperty: PERMISSIONS_PROPERTY,
  },
});

/**
 * Whether an installed plugin can run on this host: its contract version among those the host supports,
 * and the host version inside the range its registry.json asks for (`dependencies[HOST_DEPENDENCY]`);
 * each reason it cannot.
 */
export function compatibilityOf(
  row: Pick<PluginRow, "plugin_id" | "version" | "contract_version" | "registry">,
  hostVersion: string,
) {
  const reasons: string[] = [];
  const contract = semver.coerce(row.contract_version);
  if (contract === null || !semver.satisfies(contract, PLUGIN_CONTRACT.supported)) {
    reasons.push(`contract ${row.contract_version} is outside ${PLUGIN_CONTRACT.supported}`);
  }
  const host = row.registry.dependencies?.[HOST_DEPENDENCY];
  if (host !== undefined && !semver.satisfies(hostVersion, host, { includePrerelease: true })) {
    reasons.push(`needs host ${host}; this host is ${hostVersion}`);
  }
  return {
    pluginId: row.plugin_id,
    version: row.version,
    contractVersion: row.contract_version,
    compatible: reasons.length === 0,
    reasons,
  };
}

export const contractCompatibility: HandlerWith<
  { readonly reports: ReportTables; readonly hostVersion: string },
  "contracts.compatibility"
> = async (deps) => ({
  status: 200,
  body: (await deps.reports.plugins()).map((row) => compatibilityOf(row, deps.hostVersion)),
});

const AUDIT: Listing = { tag: "plugin-audit", kinds: ["bigint"] };

/**
 * The lifecycle audit, newest first. A platform session sees every entry; a workspace session only the
 * entries about its own workspace (its chain and theme changes), never other tenants' or the platform's.
 */
export const auditLog: HandlerWith<{ readonly reports: ReportTables }, "plugins.audit"> = async (
  deps,
  req,
) => {
  const page = readPage(req.query, AUDIT);
  const { limit } = page;
  const rows = await deps.reports.audit(reachWorkspace(req.principal), req.query.pluginId, page);
  return {
    status: 200,
    body: toPage(
      rows,
      limit,
      AUDIT,
      (last) => [last.id],
      (r) => ({
        id: r.id,
        atUtc: r.at.toISOString(),
        actor: r.actor,
        actorName: r.actor_name,
        action: r.action,
        pluginId: r.plugin_id,
        version: r.version,
        outcome: r.outcome,
        reason: r.reason,
      }),
    ),
  };
};

/** What every installed plugin contributes (rbac and the webhook dispatcher follow it). */
export async function contributions(reports: Pick<ReportTables, "plugins" | "entitledChains">) {
  const [rows, assigned] = await Promise.all([reports.plugins(), reports.entitledChains()]);
  return {
    plugins: rows.map((row) => {
      const v = view(row);
      return {
        pluginId: v.pluginId,
        version: v.version,
        permissions: v.permissions,
        sensitiveFields: v.sensitiveFields,
        events: v.events,
        eventSchemas: Object.entries(row.registry.eventSchemas ?? {}).map(([eventName, e]) => ({
          eventName,
          description: e.description ?? null,
          schema: e.schema,
          ...(e.example === undefined ? {} : { example: e.example }),
        })),
        state: v.state,
        routes: (row.registry.routes ?? []).map((r) => ({
          method: r.method,
          path: r.path,
          permission: r.permission ?? "",
          handler: r.handler,
        })),
        workspaces: [...(assigned.get(row.plugin_id) ?? [])],
        customFields: (row.registry.customFields ?? []).map((f) => ({
          entityName: f.entityName,
          key: f.key,
          label: f.label ?? f.key,
          type: f.type ?? "text",
          required: f.required === true,
          options: f.options ?? [],
          description: f.description ?? null,
        })),
      };
    }),
  };
}

/**
 * Rehydration: at every start the registry loads each stored package again and verifies it
 * with the current trust settings (revoked signers and content, trusted signers). A package that fails is
 * marked refused with its reason (it cannot be activated) and the failure is audited; one that passes again
 * is trusted again.
 */
export async function rehydrate(
  deps: PluginDeps,
  log: { warn: (o: object, m: string) => void },
): Promise<void> {
  const system = {
    subject: "svc:plugin-registry",
    scope: "platform",
    workspaceKey: null,
    permissions: [],
    roles: [],
  } as const;
  for (const row of await allPlugins(deps.db)) {
    const { failure } = await verifyStored(deps, row);
    const reason = failure === undefined ? null : `${reasonOf(failure)}: ${failure.message}`;
    if (reason === row.refused_reason) continue;
    await deps.db.query(sql`
      UPDATE plugin_registry.plugins SET refused_reason = ${reason},
          state = CASE WHEN ${reason === null} THEN state ELSE 'inactive' END
      WHERE plugin_id = ${row.plugin_id} AND package_sha256 = ${row.package_sha256}`);
    if (failure !== undefined && reason !== null) {
      log.warn({ pluginId: row.plugin_id, reason }, "a stored plugin was refused when it was loaded");
      await audit(deps.db, system, "verify", { id: row.plugin_id, version: row.version }, failure);
      // Operators who run plugins are notified (rbac turns the event into notifications).
      await deps
        .publishEvent?.("plugin.refused", { pluginId: row.plugin_id, version: row.version, reason })
        .catch((error: unknown) => log.warn({ err: error }, "could not announce a refused plugin"));
    }
    deps.announce(row.plugin_id);
  }
}
