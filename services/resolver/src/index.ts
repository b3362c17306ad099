export { resolverService } from "./service.js";
