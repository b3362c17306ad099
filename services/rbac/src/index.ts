export { hashPassword } from "./passwords.js";
export { bootstrapOperator, seedDemoOperator } from "./seed.js";
export { rbacService } from "./service.js";
export { rbacSettings } from "./settings.js";
