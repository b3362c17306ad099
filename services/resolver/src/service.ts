import "./settings.js";

import { ServiceName } from "@svc/contracts";
import type { ServiceDefinition } from "@svc/runtime";

import { startChangeListener } from "./change-listener.js";
import { decodeResolveRequest, resolveWorkspace } from "./handlers.js";

/** Tenants, workspaces, surfaces and the public workspace routes' data (ARCHITECTURE.md). */
export const resolverService: ServiceDefinition = {
  name: ServiceName.Resolver,
  start({ bus, db, config, log }) {
    const tenant = config.backendHost.defaultTenantKey;
    bus.serve("resolver.workspace.resolve", (request) => resolveWorkspace(db, tenant, request), {
      decode: decodeResolveRequest,
    });
    const listener = startChangeListener(config.databaseUrl, bus, log);
    return { afterDrain: () => listener.stop() };
  },
};
