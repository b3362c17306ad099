import { coalesce, createEventPublisher, EventSource, type FollowedEvent, followEvents } from "@svc/bus";
import {
  messageClient,
  type MessageImplementation,
  onBroadcast,
  pluginRegistryBroadcasts,
  pluginRegistryContract,
  publishBroadcast,
  resolverMessages,
  type RouteImplementation,
} from "@svc/contracts";
import { PackageStore } from "@svc/plugin-package/store";
import { defineService, HOST_VERSION, natsAuthOf, startHousekeeping } from "@svc/runtime";

import * as activation from "./activation.js";
import * as assignments from "./assignments.js";
import { allPlugins, deleteOldAudit, lifecycleMetrics, type PluginDeps } from "./common.js";
import * as credentials from "./credentials.js";
import * as entitlements from "./entitlements.js";
import * as plugins from "./plugins.js";
import * as reports from "./reports.js";
import { ExtractionCache } from "./runtime/cache.js";
import { PluginCredentials } from "./runtime/plugin-credentials.js";
import { SurfaceRenderer } from "./runtime/renderer.js";
import { PluginRuntime } from "./runtime/runtime.js";
import { UiManifestPublisher } from "./runtime/ui-manifest.js";
import { pluginRegistrySettings } from "./settings.js";
import { renderSurface } from "./surface.js";
import * as themes from "./themes.js";

/**
 * Plugin packages: install from an uploaded archive with verification, the installed list,
 * uninstall, re-verification, signers, contract support and the lifecycle audit; activation and the
 * plugin runtime (each active plugin in a worker of every replica), workspace chains.
 */
export const pluginRegistryService = defineService(pluginRegistryContract, {
  settings: pluginRegistrySettings,
  // Install and activation start plugin processes that read what the handler wrote: a keyed write's
  // outcome is kept right after its handler (shared/runtime/src/keyed-writes.ts).
  keyedWrites: "after-handler",
  async start({ bus, db, nc, config, metrics, log, reprovision }) {
    const store = new PackageStore(nc, config.subjectPrefix, config.backendHost.natsReplicas);
    const platformEvents = createEventPublisher(nc, config.subjectPrefix, EventSource.Platform);
    const changed = pluginRegistryBroadcasts["contributions.changed"];
    const resolver = messageClient(bus, resolverMessages);
    const base: PluginDeps = {
      db,
      store,
      settings: config.backendHost,
      hostVersion: HOST_VERSION,
      metrics: lifecycleMetrics(metrics),
      feedTimeoutMs: Math.max(1_000, config.backendHost.requestTimeoutMs - 500),
      announce: (pluginId) => publishBroadcast(bus, changed, { pluginId }),
      publishEvent: async (eventName, payload) => {
        await platformEvents.publish(eventName, null, payload);
      },
    };
    const manifest = new UiManifestPublisher(nc, config.subjectPrefix, config.backendHost.natsReplicas, log);
    const cache = new ExtractionCache(
      store,
      config.backendHost,
      HOST_VERSION,
      `${config.databaseUrl}\n${config.subjectPrefix}`,
    );
    const pluginCredentials = new PluginCredentials(config, natsAuthOf(config));
    const runtime = new PluginRuntime({
      natsUrl: config.natsUrl,
      credentials: pluginCredentials,
      prefix: config.subjectPrefix,
      cache,
      settings: config.backendHost,
      events: platformEvents,
      inChain: (pluginId, workspaceKey) => entitlements.inEntitledChain(db, pluginId, workspaceKey),
      log,
      onVerified: (row, root) => manifest.publishAssets(row, root),
      onFailure: (id, sha256, reason) =>
        void activation
          .recordFailure(deps, id, sha256, reason)
          .catch((error: unknown) =>
            log.error({ err: error, pluginId: id }, "could not record a plugin failure"),
          ),
    });
    const deps: activation.ActivationDeps & entitlements.EntitlementDeps = {
      ...base,
      runtime,
      log,
      tenancy: (request) => resolver.request("tenancy.lookup", request),
      grants: entitlements.grantTable(db),
      entitlements: entitlements.entitlementTables(db),
      lifecycle: activation.lifecycleTables(db),
    };
    const chainDeps: assignments.ChainDeps = { ...deps, chains: assignments.chainTables(db) };
    const installDeps: plugins.InstallDeps = {
      ...deps,
      packages: plugins.packageTables(db),
      open: plugins.packageOpener(deps),
    };
    const reportDeps = { ...deps, reports: reports.reportTables(db) };
    const themeTables = themes.themeTables(db);
    const themeDeps: themes.ThemeDeps = { ...deps, themes: themeTables };
    // Every replica keeps exactly the active plugins loaded: at start, on each lifecycle broadcast, every 30 s.
    const reconcile = coalesce(async () => {
      try {
        const plugins = await allPlugins(db);
        await runtime.reconcile(plugins);
        await manifest.publish(db, plugins);
      } catch (error) {
        log.warn({ err: error }, "plugin runtime reconciliation failed");
      }
    });
    onBroadcast(bus, changed, () => void reconcile());
    // Deleted workspaces and tenants: what is kept for them goes, followed durably (a deletion while the
    // registry was down is caught up when it is back). A workspace created again under
    // the same key, by another tenant, inherits nothing of the old one's chain or theme.
    const follow = (durable: string, events: string, handle: (e: FollowedEvent) => Promise<number>) =>
      followEvents(
        nc,
        {
          stream: config.eventsStream,
          prefix: config.subjectPrefix,
          durable: `${config.subjectPrefix}-plugin-registry-${durable}`,
          events,
          log,
        },
        async (event) => {
          if ((await handle(event)) > 0) deps.announce("");
        },
      );
    const text = (v: unknown) => (typeof v === "string" ? v : null);
    const followers = [
      await follow("workspace-changes", "workspace.*", async ({ eventName, data }) => {
        const workspaceKey = text(data.workspaceKey);
        if (workspaceKey === null) return 0;
        if (eventName === "workspace.deleted") return entitlements.forgetDeleted(db, [workspaceKey], []);
        const tenantKey = text(data.tenantKey);
        if (eventName === "workspace.created" && tenantKey !== null)
          return entitlements.forgetForeign(db, workspaceKey, tenantKey);
        return 0;
      }),
      await follow("tenant-deleted", "tenant.deleted", async ({ data }) => {
        const tenantKey = text(data.tenantKey);
        return tenantKey === null ? 0 : entitlements.forgetDeleted(db, [], [tenantKey]);
      }),
    ];
    const timer = setInterval(() => void reconcile(), 30_000);
    // The audit past its retention: at start, then hourly.
    const auditRetention = startHousekeeping(
      3_600_000,
      async (signal) => {
        const days = config.backendHost.pluginAuditRetentionDays;
        const deleted = await deleteOldAudit(db, days, { signal });
        if (deleted > 0) log.info({ deleted, days }, "deleted plugin audit entries past their retention");
      },
      log,
      "could not delete plugin audit entries past their retention",
    );
    timer.unref();
    const renderer = new SurfaceRenderer({
      size: config.backendHost.surfaceRenderWorkers,
      timeoutMs: config.backendHost.surfaceRenderTimeoutMs,
      readable: [cache.dir],
    });
    const messages: MessageImplementation<typeof pluginRegistryContract.messages> = {
      "surface.render": (request) =>
        renderSurface(
          { chain: (wk) => assignments.publicChain(db, wk), themes: themeTables, runtime, renderer, log },
          request,
        ),
      "contributions.list": () => reports.contributions(reportDeps.reports),
      "workspace.public": async ({ workspaceKey }) => ({
        chain: await assignments.publicChain(db, workspaceKey),
        theme: await themes.themeOf(themeTables, workspaceKey),
      }),
    };
    const credentialDeps: credentials.CredentialDeps = {
      credentials: pluginCredentials,
      prefix: config.subjectPrefix,
      tables: credentials.credentialTables(db),
    };
    const routes: RouteImplementation<typeof pluginRegistryContract.routes> = {
      "plugins.install": (req) => plugins.install(installDeps, req),
      "plugins.install-local": (req) => plugins.installLocal(installDeps, req),
      "plugins.install-feed": (req) => plugins.installFeed(installDeps, req),
      "plugins.update-upload": (req) => plugins.updateUpload(installDeps, req),
      "plugins.update-local": (req) => plugins.updateLocal(installDeps, req),
      "plugins.update-feed": (req) => plugins.updateFeed(installDeps, req),
      "plugins.list": (req) => plugins.list(installDeps, req),
      "plugins.installed": (req) => plugins.installed(installDeps, req),
      "plugins.uninstall": (req) => plugins.uninstall(installDeps, req),
      "plugins.activate": (req) => activation.activate(deps, req),
      "plugins.deactivate": (req) => activation.deactivate(deps, req),
      "assignments.get": (req) => assignments.getChain(chainDeps, req),
      "assignments.put": (req) => assignments.putChain(chainDeps, req),
      "entitlements.workspace": (req) => entitlements.workspaceEntitlement(deps, req),
      "entitlements.tenant": (req) => entitlements.tenantEntitlement(deps, req),
      "entitlements.list": (req) => entitlements.listEntitlements(deps, req),
      "entitlements.put": (req) => entitlements.putEntitlements(deps, req),
      "entitlements.sync": (req) => entitlements.syncEntitlements(deps, req),
      "delegations.list": (req) => entitlements.listDelegations(deps, req),
      "delegations.put": (req) => entitlements.putDelegation(deps, req),
      "themes.definitions": (req) => themes.listDefinitions(themeDeps, req),
      "themes.definition-put": (req) => themes.putDefinition(themeDeps, req),
      "themes.definition-activation": (req) => themes.activateDefinition(themeDeps, req),
      "themes.workspace": (req) => themes.getWorkspaceTheme(themeDeps, req),
      "themes.workspace-put": (req) => themes.putWorkspaceTheme(themeDeps, req),
      "themes.workspace-delete": (req) => themes.deleteWorkspaceTheme(themeDeps, req),
      "themes.effective": (req) => themes.getEffective(themeDeps, req),
      "themes.effective-current": (req) => themes.getEffectiveCurrent(themeDeps, req),
      "themes.settings": (req) => themes.getSettings(themeDeps, req),
      "themes.settings-put": (req) => themes.putSettings(themeDeps, req),
      "plugins.signature-report": (req) => reports.signatureReport(reportDeps, req),
      "plugins.audit": (req) => reports.auditLog(reportDeps, req),
      "plugins.credentials.issue": (req) => credentials.issue(credentialDeps, req),
      "plugins.credentials.list": (req) => credentials.list(credentialDeps, req),
      "plugins.credentials.revoke": (req) => credentials.revoke(credentialDeps, req),
      "signers.list": (req) => reports.trustedSigners(deps, req),
      "contracts.support": (req) => reports.contractSupport(deps, req),
      "contracts.compatibility": (req) => reports.contractCompatibility(reportDeps, req),
    };
    // Every stored package is loaded and verified again with the current trust settings.
    await reports
      .rehydrate(deps, log)
      .catch((error: unknown) => log.warn({ err: error }, "rehydration failed"));
    await reconcile();
    // After a NATS reconnect the buckets may be gone (a restarted server): open them again and republish.
    reprovision("plugin UI assets", async () => {
      manifest.reset();
      await reconcile();
      for (const follower of followers) await follower.ensure();
    });
    return {
      routes,
      messages,
      // Followers (rbac, the dispatcher, the gateway) may have asked while no registry answered: they read
      // the contributions again now that this one does.
      afterStart: () => publishBroadcast(bus, changed, { pluginId: "*" }),
      beforeDrain: async () => {
        for (const follower of followers) follower.stop();
      },
      afterDrain: async () => {
        clearInterval(timer);
        await auditRetention.stop();
        await renderer.close();
        await runtime.stop();
      },
    };
  },
});
