export { pluginRegistryService } from "./service.js";
export { pluginRegistrySettings } from "./settings.js";
