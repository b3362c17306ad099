/**
 * Installed plugins (issue 11): install from an uploaded archive, list, uninstall, re-verify, the
 * configured signers, the contract the host supports, and the lifecycle audit. Installs and uninstalls of
 * one plugin id are serialised across replicas (a transaction-scoped advisory lock).
 */
import type { Principal } from "@svc/bus";
import type { BackendHostSettings } from "@svc/config";
import { type pluginRegistryRoutes, type ReplyOfRoute, type RequestOfRoute } from "@svc/contracts";
import { type Db, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { ConflictError, NotFoundError, SvcError } from "@svc/errors";
import { Counter, Histogram, type Registry } from "@svc/observability";
import {
  HOST_DEPENDENCY,
  PERMISSIONS_PROPERTY,
  PLUGIN_CONTRACT,
  type RegistryJson,
} from "@svc/plugin-package";
import semver from "semver";

import { openPackage, type PackageStore, refused } from "./packages.js";
import { readFeed, readLocal } from "./sources.js";

type Routes = typeof pluginRegistryRoutes;
export type PluginHandler<K extends keyof Routes> = (
  deps: PluginDeps,
  request: RequestOfRoute<Routes[K]>,
) => Promise<ReplyOfRoute<Routes[K]>>;

export interface PluginDeps {
  readonly db: Db;
  readonly store: PackageStore;
  readonly settings: BackendHostSettings;
  readonly hostVersion: string;
  readonly metrics: LifecycleMetrics;
  /** Tells the services that hold a plugin's contributions (keys, masked fields, events) to refresh. */
  readonly announce: (pluginId: string) => void;
  /** Time limit of a package download from the feed. */
  readonly feedTimeoutMs: number;
}

interface PluginRow {
  plugin_id: string;
  name: string;
  version: string;
  tier: "system" | "application";
  contract_version: string;
  package_sha256: string;
  signed: boolean;
  signer_fingerprint: string | null;
  publisher_id: string | null;
  registry: RegistryJson & { events?: string[] };
  is_active: boolean;
  refused_reason: string | null;
  installed_at: Date;
  updated_at: Date;
}

function view(row: PluginRow) {
  return {
    pluginId: row.plugin_id,
    name: row.name,
    version: row.version,
    tier: row.tier,
    contractVersion: row.contract_version,
    signed: row.signed,
    signerFingerprint: row.signer_fingerprint,
    publisherId: row.publisher_id,
    packageSha256: row.package_sha256,
    permissions: [...(row.registry[PERMISSIONS_PROPERTY] ?? [])],
    sensitiveFields: [...(row.registry.sensitiveFields ?? [])],
    events: [...(row.registry.events ?? [])],
    isActive: row.is_active,
    trustStatus: row.refused_reason === null ? ("trusted" as const) : ("refused" as const),
    refusedReason: row.refused_reason,
    installedAtUtc: row.installed_at.toISOString(),
    updatedAtUtc: row.updated_at.toISOString(),
  };
}

/** svc_plugin_lifecycle_operations_total and svc_plugin_lifecycle_duration_ms, by action and outcome. */
export function lifecycleMetrics(registry: Registry) {
  const operations = new Counter({
    name: "svc_plugin_lifecycle_operations_total",
    help: "Plugin lifecycle operations (install, update, uninstall, verify) by outcome.",
    labelNames: ["action", "outcome"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "svc_plugin_lifecycle_duration_ms",
    help: "Duration of plugin lifecycle operations in milliseconds, by action and outcome.",
    labelNames: ["action", "outcome"] as const,
    buckets: [5, 10, 25, 50, 100, 200, 500, 1_000, 2_500, 5_000, 10_000],
    registers: [registry],
  });
  return {
    async time<T>(action: string, work: () => Promise<T>): Promise<T> {
      const started = performance.now();
      let outcome = "failed";
      try {
        const result = await work();
        outcome = "succeeded";
        return result;
      } finally {
        operations.inc({ action, outcome });
        duration.observe({ action, outcome }, performance.now() - started);
      }
    },
  };
}
export type LifecycleMetrics = ReturnType<typeof lifecycleMetrics>;

async function audit(
  db: Queries,
  principal: Principal,
  action: string,
  plugin: { id?: string | null; version?: string | null },
  error?: unknown,
): Promise<void> {
  const reason =
    error === undefined
      ? null
      : error instanceof SvcError
        ? `${reasonOf(error)}: ${error.message}`
        : "internal error";
  await db.query(sql`
    INSERT INTO plugin_registry.audit (actor, action, plugin_id, version, outcome, reason)
    VALUES (${principal.subject}, ${action}, ${plugin.id ?? null}, ${plugin.version ?? null},
            ${error === undefined ? "succeeded" : "failed"}, ${reason})`);
}

/** The refusal's reason code (`SVC_PLUGIN_REFUSED`), else the error code. */
const reasonOf = (error: SvcError): string =>
  typeof error.extensions.reason === "string" ? error.extensions.reason : error.code;

const lockPlugin = (tx: Queries, pluginId: string) =>
  tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`plugin:${pluginId}`}))`);

/** Deletes an uploaded package unless an installed plugin is that package. */
async function dropUnreferenced(deps: PluginDeps, sha256: string) {
  const used = await deps.db.maybeOne(
    sql`SELECT 1 AS one FROM plugin_registry.plugins WHERE package_sha256 = ${sha256} LIMIT 1`,
  );
  if (used === null) await deps.store.delete(sha256);
}

async function installedVersions(db: Queries): Promise<Map<string, string>> {
  const rows = await db.any<{ plugin_id: string; version: string }>(
    sql`SELECT plugin_id, version FROM plugin_registry.plugins`,
  );
  return new Map(rows.map((r) => [r.plugin_id, r.version]));
}

type Mode = { kind: "install" } | { kind: "update"; id: string; allowDowngrade: boolean };

/**
 * Installs (or updates) the stored package `sha256`: opened, verified and validated, then recorded under
 * the plugin id's lock. An update replaces the old version in one transaction; a downgrade is refused
 * unless asked for.
 */
async function installPackage(deps: PluginDeps, principal: Principal, sha256: string, mode: Mode) {
  const action = mode.kind;
  let plugin: { id?: string; version?: string } = mode.kind === "update" ? { id: mode.id } : {};
  try {
    const { row, created, previous } = await deps.metrics.time(action, async () => {
      const installedNow = await installedVersions(deps.db);
      if (mode.kind === "update") installedNow.delete(mode.id);
      const opened = await openPackage(await deps.store.get(sha256), {
        settings: deps.settings,
        hostVersion: deps.hostVersion,
        installed: installedNow,
      });
      const r = opened.registry;
      plugin = { id: r.pluginId, version: r.version };
      if (mode.kind === "update" && r.pluginId !== mode.id) {
        throw refused("plugin-id-mismatch", `The package is plugin '${r.pluginId}', not '${mode.id}'.`);
      }
      return deps.db.transaction(async (tx) => {
        await lockPlugin(tx, r.pluginId);
        const existing = await tx.maybeOne<PluginRow>(
          sql`SELECT * FROM plugin_registry.plugins WHERE plugin_id = ${r.pluginId}`,
        );
        if (mode.kind === "install" && existing !== null) {
          throw new ConflictError(
            `Plugin '${r.pluginId}' ${existing.version} is installed already: update it, or uninstall it first.`,
          );
        }
        if (mode.kind === "update") {
          if (existing === null) throw new NotFoundError(`Plugin '${mode.id}' is not installed.`);
          if (
            semver.valid(existing.version) &&
            semver.lt(r.version, existing.version) &&
            !mode.allowDowngrade
          ) {
            throw new ConflictError(
              `${r.version} is older than the installed ${existing.version}: pass allowDowngrade=true to go back.`,
            );
          }
          if (existing.version === r.version && existing.package_sha256 === sha256) {
            return { row: existing, created: false, previous: undefined };
          }
        }
        const values = sql`
          ${r.name}, ${r.version}, ${r.tier ?? "application"}, ${r.contractVersion}, ${sha256}, ${opened.signed},
          ${opened.manifest?.signerFingerprint ?? null}, ${opened.signer?.publisherId ?? null},
          ${JSON.stringify(r)}::jsonb, ${opened.manifest === undefined ? null : JSON.stringify(opened.manifest)}::jsonb,
          ${principal.subject}`;
        const saved = await tx.one<PluginRow>(sql`
          INSERT INTO plugin_registry.plugins
            (plugin_id, name, version, tier, contract_version, package_sha256, signed, signer_fingerprint,
             publisher_id, registry, manifest, installed_by)
          VALUES (${r.pluginId}, ${values})
          ON CONFLICT (plugin_id) DO UPDATE SET
            name = excluded.name, version = excluded.version, tier = excluded.tier,
            contract_version = excluded.contract_version, package_sha256 = excluded.package_sha256,
            signed = excluded.signed, signer_fingerprint = excluded.signer_fingerprint,
            publisher_id = excluded.publisher_id, registry = excluded.registry, manifest = excluded.manifest,
            refused_reason = NULL, updated_at = now()
          RETURNING *`);
        return { row: saved, created: existing === null, previous: existing?.package_sha256 };
      });
    });
    await audit(deps.db, principal, action, plugin);
    deps.announce(row.plugin_id);
    if (previous !== undefined && previous !== sha256) await dropUnreferenced(deps, previous);
    return {
      status: created ? 201 : 200,
      body: view(row),
      headers: { location: `/api/plugins/${row.plugin_id}` },
    };
  } catch (error) {
    await audit(deps.db, principal, action, plugin, error);
    await dropUnreferenced(deps, sha256);
    throw error;
  }
}

export const install: PluginHandler<"plugins.install"> = (deps, req) =>
  installPackage(deps, req.principal, req.body.package.sha256, { kind: "install" });

/** A package from the host's disk or the feed, stored like an upload; its hash. */
const fromLocal = async (deps: PluginDeps, path: string) =>
  deps.store.put(await readLocal(deps.settings, path));
const fromFeed = async (deps: PluginDeps, source: { packageId: string; version: string }) =>
  deps.store.put(await readFeed(deps.settings, source.packageId, source.version, deps.feedTimeoutMs));
const update = (id: string, query: { allowDowngrade?: boolean }): Mode => ({
  kind: "update",
  id,
  allowDowngrade: query.allowDowngrade === true,
});

export const installLocal: PluginHandler<"plugins.install-local"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromLocal(deps, req.body.path), { kind: "install" });

export const installFeed: PluginHandler<"plugins.install-feed"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromFeed(deps, req.body), { kind: "install" });

export const updateLocal: PluginHandler<"plugins.update-local"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromLocal(deps, req.body.path), update(req.params.id, req.query));

export const updateFeed: PluginHandler<"plugins.update-feed"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromFeed(deps, req.body), update(req.params.id, req.query));

const listInstalled = async (db: Queries) =>
  (await db.any<PluginRow>(sql`SELECT * FROM plugin_registry.plugins ORDER BY plugin_id`)).map(view);

export const list: PluginHandler<"plugins.list"> = async (deps) => ({
  status: 200,
  body: await listInstalled(deps.db),
});
export const installed: PluginHandler<"plugins.installed"> = async (deps) => ({
  status: 200,
  body: await listInstalled(deps.db),
});

export const uninstall: PluginHandler<"plugins.uninstall"> = async (deps, req) => {
  const id = req.params.id;
  let version: string | undefined;
  try {
    const row = await deps.metrics.time("uninstall", () =>
      deps.db.transaction(async (tx) => {
        await lockPlugin(tx, id);
        const gone = await tx.maybeOne<PluginRow>(
          sql`DELETE FROM plugin_registry.plugins WHERE plugin_id = ${id} RETURNING *`,
        );
        if (gone === null) throw new NotFoundError(`Plugin '${id}' is not installed.`);
        return gone;
      }),
    );
    version = row.version;
    await audit(deps.db, req.principal, "uninstall", { id, version });
    deps.announce(id);
    await dropUnreferenced(deps, row.package_sha256);
    return { status: 204 };
  } catch (error) {
    await audit(deps.db, req.principal, "uninstall", { id, version }, error);
    throw error;
  }
};

/** Re-verifies every installed plugin's stored package now, with the current trust settings. */
export const signatureReport: PluginHandler<"plugins.signature-report"> = async (deps) => {
  const rows = await deps.db.any<PluginRow>(sql`SELECT * FROM plugin_registry.plugins ORDER BY plugin_id`);
  const items = [];
  for (const row of rows) {
    try {
      const opened = await deps.metrics.time("verify", async () =>
        openPackage(await deps.store.get(row.package_sha256), {
          settings: deps.settings,
          hostVersion: deps.hostVersion,
          trustOnly: true,
        }),
      );
      items.push({
        pluginId: row.plugin_id,
        version: row.version,
        status: opened.signed ? ("valid" as const) : ("unsigned" as const),
        code: null,
        reason: null,
      });
    } catch (error) {
      if (!(error instanceof SvcError)) throw error;
      items.push({
        pluginId: row.plugin_id,
        version: row.version,
        status: "invalid" as const,
        code: reasonOf(error),
        reason: error.message,
      });
    }
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

export const contractCompatibility: PluginHandler<"contracts.compatibility"> = async (deps) => {
  const rows = await deps.db.any<PluginRow>(sql`SELECT * FROM plugin_registry.plugins ORDER BY plugin_id`);
  return {
    status: 200,
    body: rows.map((row) => {
      const reasons: string[] = [];
      const contract = semver.coerce(row.contract_version);
      if (contract === null || !semver.satisfies(contract, PLUGIN_CONTRACT.supported)) {
        reasons.push(`contract ${row.contract_version} is outside ${PLUGIN_CONTRACT.supported}`);
      }
      const host = row.registry.dependencies?.[HOST_DEPENDENCY];
      if (host !== undefined && !semver.satisfies(deps.hostVersion, host, { includePrerelease: true })) {
        reasons.push(`needs host ${host}; this host is ${deps.hostVersion}`);
      }
      return {
        pluginId: row.plugin_id,
        version: row.version,
        contractVersion: row.contract_version,
        compatible: reasons.length === 0,
        reasons,
      };
    }),
  };
};

const AUDIT: Listing = { tag: "plugin-audit", kinds: ["bigint"] };

export const auditLog: PluginHandler<"plugins.audit"> = async (deps, req) => {
  const { limit, after } = readPage(req.query, AUDIT);
  const rows = await deps.db.any<{
    id: string;
    at: Date;
    actor: string;
    action: string;
    plugin_id: string | null;
    version: string | null;
    outcome: "succeeded" | "failed";
    reason: string | null;
  }>(sql`
    SELECT a.id::text AS id, at, actor, action, plugin_id, version, outcome, reason FROM plugin_registry.audit a
    WHERE (${after?.[0] ?? null}::bigint IS NULL OR a.id < ${after?.[0] ?? null}::bigint)
    -- a.id, the bigint column: the text output column would sort "9" before "10".
    ORDER BY a.id DESC LIMIT ${limit + 1}`);
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
export async function contributions(db: Queries) {
  const rows = await db.any<PluginRow>(sql`SELECT * FROM plugin_registry.plugins ORDER BY plugin_id`);
  return {
    plugins: rows.map((row) => {
      const v = view(row);
      return {
        pluginId: v.pluginId,
        permissions: v.permissions,
        sensitiveFields: v.sensitiveFields,
        events: v.events,
      };
    }),
  };
}

/**
 * Rehydration (spec 5.7.4): at every start the registry loads each stored package again and verifies it
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
  const rows = await deps.db.any<PluginRow>(sql`SELECT * FROM plugin_registry.plugins ORDER BY plugin_id`);
  for (const row of rows) {
    let reason: string | null = null;
    let failure: SvcError | undefined;
    try {
      await deps.metrics.time("verify", async () =>
        openPackage(await deps.store.get(row.package_sha256), {
          settings: deps.settings,
          hostVersion: deps.hostVersion,
          trustOnly: true,
        }),
      );
    } catch (error) {
      if (!(error instanceof SvcError)) throw error;
      failure = error;
      reason = `${reasonOf(error)}: ${error.message}`;
    }
    if (reason === row.refused_reason) continue;
    await deps.db.query(sql`
      UPDATE plugin_registry.plugins SET refused_reason = ${reason}, is_active = is_active AND ${reason === null}
      WHERE plugin_id = ${row.plugin_id} AND package_sha256 = ${row.package_sha256}`);
    if (failure !== undefined) {
      log.warn({ pluginId: row.plugin_id, reason }, "a stored plugin was refused when it was loaded");
      await audit(deps.db, system, "verify", { id: row.plugin_id, version: row.version }, failure);
    }
    deps.announce(row.plugin_id);
  }
}
