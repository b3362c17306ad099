export { seedDemoWorkspace } from "./seed.js";
export { resolverService } from "./service.js";
export { resolverSettings } from "./settings.js";
