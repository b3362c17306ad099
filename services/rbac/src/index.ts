export { rbacService } from "./service.js";
