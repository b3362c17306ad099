export { seedDemoWorkspace } from "./seed.js";
export { resolverService } from "./service.js";
export { type ResolverConfig, resolverSettings } from "./settings.js";
