export { hashPassword } from "./passwords.js";
export { rbacService } from "./service.js";
