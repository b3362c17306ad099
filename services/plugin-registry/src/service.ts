import "./settings.js";

import { pluginRegistryRoutes as r, serveRoute, ServiceName } from "@svc/contracts";
import { PackageStore } from "@svc/plugin-package/store";
import { HOST_VERSION, type ServiceDefinition } from "@svc/runtime";

import { lifecycleMetrics, type PluginDeps } from "./common.js";
import * as plugins from "./plugins.js";
import * as reports from "./reports.js";

/**
 * Plugin packages: install from an uploaded archive with verification (spec 5.7), the installed list,
 * uninstall, re-verification, signers, contract support and the lifecycle audit. Activation,
 * assignment, entitlements and the plugin runtime arrive with the next issue.
 */
export const pluginRegistryService: ServiceDefinition = {
  name: ServiceName.PluginRegistry,
  async start({ bus, db, nc, config, metrics, log }) {
    const deps: PluginDeps = {
      db,
      store: new PackageStore(nc, config.subjectPrefix),
      settings: config.backendHost,
      hostVersion: HOST_VERSION,
      metrics: lifecycleMetrics(metrics),
      feedTimeoutMs: Math.max(1_000, config.backendHost.requestTimeoutMs - 500),
      announce: (pluginId) => bus.broadcast("plugin-registry.contributions.changed", { pluginId }),
    };
    bus.serve("plugin-registry.contributions.list", () => reports.contributions(db));
    serveRoute(bus, r["plugins.install"], (req) => plugins.install(deps, req));
    serveRoute(bus, r["plugins.install-local"], (req) => plugins.installLocal(deps, req));
    serveRoute(bus, r["plugins.install-feed"], (req) => plugins.installFeed(deps, req));
    serveRoute(bus, r["plugins.update-local"], (req) => plugins.updateLocal(deps, req));
    serveRoute(bus, r["plugins.update-feed"], (req) => plugins.updateFeed(deps, req));
    serveRoute(bus, r["plugins.list"], (req) => plugins.list(deps, req));
    serveRoute(bus, r["plugins.installed"], (req) => plugins.installed(deps, req));
    serveRoute(bus, r["plugins.uninstall"], (req) => plugins.uninstall(deps, req));
    serveRoute(bus, r["plugins.signature-report"], (req) => reports.signatureReport(deps, req));
    serveRoute(bus, r["plugins.audit"], (req) => reports.auditLog(deps, req));
    serveRoute(bus, r["signers.list"], (req) => reports.trustedSigners(deps, req));
    serveRoute(bus, r["contracts.support"], (req) => reports.contractSupport(deps, req));
    serveRoute(bus, r["contracts.compatibility"], (req) => reports.contractCompatibility(deps, req));
    // Every stored package is loaded and verified again with the current trust settings.
    await reports
      .rehydrate(deps, log)
      .catch((error: unknown) => log.warn({ err: error }, "rehydration failed"));
    return undefined;
  },
};
