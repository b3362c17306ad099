import "./settings.js";

import { pluginRegistryRoutes as r, serveRoute, ServiceName } from "@svc/contracts";
import { HOST_VERSION, type ServiceDefinition } from "@svc/runtime";

import { PackageStore } from "./packages.js";
import * as plugins from "./plugins.js";

/**
 * Plugin packages: install from an uploaded archive with verification (spec 5.7), the installed list,
 * uninstall, re-verification, signers, contract support and the lifecycle audit. Activation,
 * assignment, entitlements and the plugin runtime arrive with the next issue.
 */
export const pluginRegistryService: ServiceDefinition = {
  name: ServiceName.PluginRegistry,
  async start({ bus, db, nc, config, metrics, log }) {
    const deps: plugins.PluginDeps = {
      db,
      store: new PackageStore(nc, config.subjectPrefix),
      settings: config.backendHost,
      hostVersion: HOST_VERSION,
      metrics: plugins.lifecycleMetrics(metrics),
      feedTimeoutMs: Math.max(1_000, config.backendHost.requestTimeoutMs - 500),
      announce: (pluginId) => bus.broadcast("plugin-registry.contributions.changed", { pluginId }),
    };
    bus.serve("plugin-registry.contributions.list", () => plugins.contributions(db));
    serveRoute(bus, r["plugins.install"], (req) => plugins.install(deps, req));
    serveRoute(bus, r["plugins.install-local"], (req) => plugins.installLocal(deps, req));
    serveRoute(bus, r["plugins.install-feed"], (req) => plugins.installFeed(deps, req));
    serveRoute(bus, r["plugins.update-local"], (req) => plugins.updateLocal(deps, req));
    serveRoute(bus, r["plugins.update-feed"], (req) => plugins.updateFeed(deps, req));
    serveRoute(bus, r["plugins.list"], (req) => plugins.list(deps, req));
    serveRoute(bus, r["plugins.installed"], (req) => plugins.installed(deps, req));
    serveRoute(bus, r["plugins.uninstall"], (req) => plugins.uninstall(deps, req));
    serveRoute(bus, r["plugins.signature-report"], (req) => plugins.signatureReport(deps, req));
    serveRoute(bus, r["plugins.audit"], (req) => plugins.auditLog(deps, req));
    serveRoute(bus, r["signers.list"], (req) => plugins.trustedSigners(deps, req));
    serveRoute(bus, r["contracts.support"], (req) => plugins.contractSupport(deps, req));
    serveRoute(bus, r["contracts.compatibility"], (req) => plugins.contractCompatibility(deps, req));
    // Every stored package is loaded and verified again with the current trust settings.
    await plugins
      .rehydrate(deps, log)
      .catch((error: unknown) => log.warn({ err: error }, "rehydration failed"));
    return undefined;
  },
};
