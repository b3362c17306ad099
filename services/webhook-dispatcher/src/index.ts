export { webhookDispatcherService } from "./service.js";
export { webhookSettings } from "./settings.js";
