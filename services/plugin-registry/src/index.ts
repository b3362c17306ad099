export { pluginRegistryService } from "./service.js";
export { type PluginRegistryConfig, pluginRegistrySettings } from "./settings.js";
