export { hashPassword } from "./passwords.js";
export { bootstrapOperator, reportWorkspaceGlobalRoles, seedDemoOperator } from "./seed.js";
export { rbacService } from "./service.js";
export { type RbacConfig, rbacSettings } from "./settings.js";
