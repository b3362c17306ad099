/**
 * Installing, updating, listing and uninstalling plugins: from an upload, the host's disk or
 * the feed. Installs and uninstalls of one plugin id are serialised across replicas (a transaction-scoped
 * advisory lock).
 *
 * The routes ask a `PackageTables` port (`packageTables` is the PostgreSQL one) and open packages through
 * `open`, so their rules are unit-tested with the tables, the store and the opened packages in memory.
 */
import type { Principal } from "@svc/bus";
import { type Db, sql } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import type { RegistryJson, SignatureManifest, Theme, ThemeDefinition } from "@svc/plugin-package";
import type { PackageStore } from "@svc/plugin-package/store";
import semver from "semver";

import {
  allPlugins,
  audit,
  type AuditTable,
  type HandlerWith,
  lockedPlugin,
  lockPlugin,
  type PluginDeps,
  type PluginRow,
  type RouteName,
  view,
} from "./common.js";
import { type OpenedPackage, type OpenOptions, openPackage, refused, storedPackage } from "./packages.js";
import { readFeed, readLocal } from "./sources.js";

/** A plugin as an install or an update records it. */
export interface PluginRecord {
  readonly registry: RegistryJson;
  readonly sha256: string;
  readonly signed: boolean;
  readonly signerFingerprint: string | null;
  readonly publisherId: string | null;
  readonly manifest: SignatureManifest | null;
  readonly theme: Theme | null;
}

/** What one install or update asks of the tables, while the plugin id is locked. */
export interface InstallChange {
  /** The plugin installed under the id, or null. */
  readonly existing: PluginRow | null;
  /**
   * Records the plugin (an update keeps its state, but a `failed` one becomes `inactive`, and clears its
   * refusal and failure).
   */
  save(record: PluginRecord, by: string): Promise<PluginRow>;
  /** Adds the package's template definitions for its version; definitions already there stay as they are. */
  addDefinitions(
    pluginId: string,
    version: string,
    definitions: readonly ThemeDefinition[],
    by: string,
  ): Promise<void>;
}

/** The installed plugins' tables. */
export interface PackageTables extends AuditTable {
  /** Installed plugins by id → version. */
  installedVersions(): Promise<Map<string, string>>;
  /** Every installed plugin, by id. */
  all(): Promise<PluginRow[]>;
  /** Runs `change` with the plugin id locked: one install, update or uninstall at a time per id, across replicas. */
  change<T>(pluginId: string, change: (tables: InstallChange) => Promise<T>): Promise<T>;
  /** Removes the plugin (under its lock); what was removed, or null when it was not installed. */
  remove(pluginId: string): Promise<PluginRow | null>;
  /** Whether an installed plugin is the package `sha256`. */
  inUse(sha256: string): Promise<boolean>;
}

export interface InstallDeps extends Pick<PluginDeps, "settings" | "metrics" | "announce" | "feedTimeoutMs"> {
  readonly packages: PackageTables;
  /** The uploaded packages: put by the local and feed sources, deleted once nothing installed is them. */
  readonly store: Pick<PackageStore, "put" | "delete">;
  /** Opens, verifies and validates a stored package (`packageOpener`). */
  readonly open: (
    sha256: string,
    options: Pick<OpenOptions, "installed" | "claimed">,
  ) => Promise<OpenedPackage>;
}

type Handler<K extends RouteName> = HandlerWith<InstallDeps, K>;

/** Opens stored packages from the package store, with the registry's settings and the host's version. */
export const packageOpener =
  (deps: Pick<PluginDeps, "store" | "settings" | "hostVersion">): InstallDeps["open"] =>
  async (sha256, options) =>
    openPackage(await storedPackage(deps.store, sha256), {
      ...options,
      settings: deps.settings,
      hostVersion: deps.hostVersion,
    });

/** The PostgreSQL package tables. */
export function packageTables(db: Db): PackageTables {
  return {
    async installedVersions() {
      const rows = await db.any<{ plugin_id: string; version: string }>(
        sql`SELECT plugin_id, version FROM plugin_registry.plugins`,
      );
      return new Map(rows.map((r) => [r.plugin_id, r.version]));
    },
    all: () => allPlugins(db),
    change: (pluginId, change) =>
      db.transaction(async (tx) => {
        const existing = await lockedPlugin(tx, pluginId);
        return change({
          existing,
          save(p, by) {
            const r = p.registry;
            const values = sql`
              ${r.name}, ${r.version}, ${r.tier ?? "application"}, ${r.contractVersion}, ${p.sha256}, ${p.signed},
              ${p.signerFingerprint}, ${p.publisherId}, ${JSON.stringify(r)}::jsonb,
              ${p.manifest === null ? null : JSON.stringify(p.manifest)}::jsonb,
              ${by}, ${p.theme === null ? null : JSON.stringify(p.theme)}::jsonb`;
            return tx.one<PluginRow>(sql`
              INSERT INTO plugin_registry.plugins
                (plugin_id, name, version, tier, contract_version, package_sha256, signed, signer_fingerprint,
                 publisher_id, registry, manifest, installed_by, theme)
              VALUES (${r.pluginId}, ${values})
              ON CONFLICT (plugin_id) DO UPDATE SET
                name = excluded.name, version = excluded.version, tier = excluded.tier,
                contract_version = excluded.contract_version, package_sha256 = excluded.package_sha256,
                signed = excluded.signed, signer_fingerprint = excluded.signer_fingerprint,
                publisher_id = excluded.publisher_id, registry = excluded.registry, manifest = excluded.manifest,
                theme = excluded.theme, refused_reason = NULL, failure_reason = NULL,
                state = CASE WHEN plugins.state = 'failed' THEN 'inactive' ELSE plugins.state END,
                updated_at = now()
              RETURNING *`);
          },
          async addDefinitions(pluginId, version, defs, by) {
            if (defs.length === 0) return;
            await tx.query(sql`
              INSERT INTO plugin_registry.theme_definitions
                (template_key, plugin_id, version, display_name, template_path, parent_template_key, surface,
                 scope, is_active, priority, source, updated_by)
              SELECT t.key, ${pluginId}, ${version}, t.name, t.path, t.parent, t.surface, t.scope, t.active,
                     t.priority, 'package', ${by}
              FROM unnest(${defs.map((d) => d.templateKey)}::text[], ${defs.map((d) => d.displayName)}::text[],
                          ${defs.map((d) => d.templatePath)}::text[], ${defs.map((d) => d.parentTemplateKey)}::text[],
                          ${defs.map((d) => d.surface)}::text[], ${defs.map((d) => d.scope)}::text[],
                          ${defs.map((d) => d.isActive)}::boolean[], ${defs.map((d) => d.priority)}::int[])
                AS t(key, name, path, parent, surface, scope, active, priority)
              ON CONFLICT (template_key, plugin_id, version) DO NOTHING`);
          },
        });
      }),
    remove: (pluginId) =>
      db.transaction(async (tx) => {
        await lockPlugin(tx, pluginId);
        return tx.maybeOne<PluginRow>(
          sql`DELETE FROM plugin_registry.plugins WHERE plugin_id = ${pluginId} RETURNING *`,
        );
      }),
    async inUse(sha256) {
      const used = await db.maybeOne(
        sql`SELECT 1 AS one FROM plugin_registry.plugins WHERE package_sha256 = ${sha256} LIMIT 1`,
      );
      return used !== null;
    },
    audit: (principal, action, plugin, error) => audit(db, principal, action, plugin, error),
  };
}

/** Deletes an uploaded package unless an installed plugin is that package. */
async function dropUnreferenced(deps: InstallDeps, sha256: string) {
  if (!(await deps.packages.inUse(sha256))) await deps.store.delete(sha256);
}

type Mode = { kind: "install" } | { kind: "update"; id: string; allowDowngrade: boolean };

/**
 * Installs (or updates) the stored package `sha256`: opened, verified and validated, then recorded under
 * the plugin id's lock. An update replaces the old version in one transaction; a downgrade is refused
 * unless asked for.
 */
async function installPackage(deps: InstallDeps, principal: Principal, sha256: string, mode: Mode) {
  const action = mode.kind;
  let plugin: { id?: string; version?: string } = mode.kind === "update" ? { id: mode.id } : {};
  try {
    const { row, created, previous } = await deps.metrics.time(action, async () => {
      const installedNow = await deps.packages.installedVersions();
      if (mode.kind === "update") installedNow.delete(mode.id);
      const opened = await deps.open(sha256, {
        installed: installedNow,
        // A refused package is audited under the plugin it claims to be.
        claimed: (claim) => {
          if (mode.kind !== "update") {
            plugin =
              claim.version === undefined ? { id: claim.id } : { id: claim.id, version: claim.version };
          }
        },
      });
      const r = opened.registry;
      plugin = { id: r.pluginId, version: r.version };
      if (mode.kind === "update" && r.pluginId !== mode.id) {
        throw refused("plugin-id-mismatch", `The package is plugin '${r.pluginId}', not '${mode.id}'.`);
      }
      return deps.packages.change(r.pluginId, async (tables) => {
        const existing = tables.existing;
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
        const saved = await tables.save(
          {
            registry: r,
            sha256,
            signed: opened.signed,
            signerFingerprint: opened.manifest?.signerFingerprint ?? null,
            publisherId: opened.signer?.publisherId ?? null,
            manifest: opened.manifest ?? null,
            theme: opened.theme ?? null,
          },
          principal.subject,
        );
        // The package's template definitions for this version; ones registered through the API stay.
        await tables.addDefinitions(
          r.pluginId,
          r.version,
          opened.theme?.definitions ?? [],
          principal.subject,
        );
        return { row: saved, created: existing === null, previous: existing?.package_sha256 };
      });
    });
    await deps.packages.audit(principal, action, plugin);
    deps.announce(row.plugin_id);
    if (previous !== undefined && previous !== sha256) await dropUnreferenced(deps, previous);
    return {
      status: created ? 201 : 200,
      body: view(row),
      headers: { location: `/api/plugins/${row.plugin_id}` },
    };
  } catch (error) {
    await deps.packages.audit(principal, action, plugin, error);
    await dropUnreferenced(deps, sha256);
    throw error;
  }
}

export const install: Handler<"plugins.install"> = (deps, req) =>
  installPackage(deps, req.principal, req.body.package.sha256, { kind: "install" });

/** A package from the host's disk or the feed, stored like an upload; its hash. */
const fromLocal = async (deps: InstallDeps, path: string) =>
  deps.store.put(await readLocal(deps.settings, path));
const fromFeed = async (deps: InstallDeps, source: { packageId: string; version: string }) =>
  deps.store.put(await readFeed(deps.settings, source.packageId, source.version, deps.feedTimeoutMs));
const update = (id: string, query: { allowDowngrade?: boolean }): Mode => ({
  kind: "update",
  id,
  allowDowngrade: query.allowDowngrade === true,
});

export const installLocal: Handler<"plugins.install-local"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromLocal(deps, req.body.path), { kind: "install" });

export const installFeed: Handler<"plugins.install-feed"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromFeed(deps, req.body), { kind: "install" });

export const updateUpload: Handler<"plugins.update-upload"> = (deps, req) =>
  installPackage(deps, req.principal, req.body.package.sha256, update(req.params.id, req.query));

export const updateLocal: Handler<"plugins.update-local"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromLocal(deps, req.body.path), update(req.params.id, req.query));

export const updateFeed: Handler<"plugins.update-feed"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromFeed(deps, req.body), update(req.params.id, req.query));

const listInstalled = async (deps: InstallDeps) => (await deps.packages.all()).map(view);

export const list: Handler<"plugins.list"> = async (deps) => ({
  status: 200,
  body: await listInstalled(deps),
});
export const installed: Handler<"plugins.installed"> = async (deps) => ({
  status: 200,
  body: await listInstalled(deps),
});

export const uninstall: Handler<"plugins.uninstall"> = async (deps, req) => {
  const id = req.params.id;
  let version: string | undefined;
  try {
    const row = await deps.metrics.time("uninstall", async () => {
      const gone = await deps.packages.remove(id);
      if (gone === null) throw new NotFoundError(`Plugin '${id}' is not installed.`);
      return gone;
    });
    version = row.version;
    await deps.packages.audit(req.principal, "uninstall", { id, version });
    deps.announce(id);
    await dropUnreferenced(deps, row.package_sha256);
    return { status: 204 };
  } catch (error) {
    await deps.packages.audit(req.principal, "uninstall", { id, version }, error);
    throw error;
  }
};
