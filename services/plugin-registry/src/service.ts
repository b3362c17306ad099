import { ServiceName } from "@svc/contracts";
import type { ServiceDefinition } from "@svc/runtime";

/**
 * Plugin packages: validation, signatures, install, activation, assignment and the plugin runtime.
 * This foundation answers `plugin-registry.ping` and owns its schema; its handlers arrive with the issues that build it.
 */
export const pluginRegistryService: ServiceDefinition = {
  name: ServiceName.PluginRegistry,
  start() {
    return undefined;
  },
};
