export { seedDemoWorkspace } from "./seed.js";
export { resolverService } from "./service.js";
