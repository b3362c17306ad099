export { pluginRegistryService } from "./service.js";
