/**
 * Installing, updating, listing and uninstalling plugins: from an upload, the host's disk or
 * the feed. Installs and uninstalls of one plugin id are serialised across replicas (a transaction-scoped
 * advisory lock).
 */
import type { Principal } from "@svc/bus";
import { type Queries, sql } from "@svc/db";
import { ConflictError, NotFoundError } from "@svc/errors";
import semver from "semver";

import {
  allPlugins,
  audit,
  dropUnreferenced,
  installedVersions,
  lockPlugin,
  type PluginDeps,
  type PluginHandler,
  type PluginRow,
  view,
} from "./common.js";
import { openPackage, refused, storedPackage } from "./packages.js";
import { readFeed, readLocal } from "./sources.js";

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
      const opened = await openPackage(await storedPackage(deps.store, sha256), {
        settings: deps.settings,
        hostVersion: deps.hostVersion,
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
          ${principal.subject}, ${opened.theme === undefined ? null : JSON.stringify(opened.theme)}::jsonb`;
        const saved = await tx.one<PluginRow>(sql`
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
        // The package's template definitions for this version; ones registered through the API stay.
        const defs = opened.theme?.definitions ?? [];
        if (defs.length > 0) {
          await tx.query(sql`
            INSERT INTO plugin_registry.theme_definitions
              (template_key, plugin_id, version, display_name, template_path, parent_template_key, surface,
               scope, is_active, priority, source, updated_by)
            SELECT t.key, ${r.pluginId}, ${r.version}, t.name, t.path, t.parent, t.surface, t.scope, t.active,
                   t.priority, 'package', ${principal.subject}
            FROM unnest(${defs.map((d) => d.templateKey)}::text[], ${defs.map((d) => d.displayName)}::text[],
                        ${defs.map((d) => d.templatePath)}::text[], ${defs.map((d) => d.parentTemplateKey)}::text[],
                        ${defs.map((d) => d.surface)}::text[], ${defs.map((d) => d.scope)}::text[],
                        ${defs.map((d) => d.isActive)}::boolean[], ${defs.map((d) => d.priority)}::int[])
              AS t(key, name, path, parent, surface, scope, active, priority)
            ON CONFLICT (template_key, plugin_id, version) DO NOTHING`);
        }
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

export const updateUpload: PluginHandler<"plugins.update-upload"> = (deps, req) =>
  installPackage(deps, req.principal, req.body.package.sha256, update(req.params.id, req.query));

export const updateLocal: PluginHandler<"plugins.update-local"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromLocal(deps, req.body.path), update(req.params.id, req.query));

export const updateFeed: PluginHandler<"plugins.update-feed"> = async (deps, req) =>
  installPackage(deps, req.principal, await fromFeed(deps, req.body), update(req.params.id, req.query));

const listInstalled = async (db: Queries) => (await allPlugins(db)).map(view);

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
