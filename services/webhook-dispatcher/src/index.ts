export { settleAllStrandedDeliveries } from "./deliveries.js";
export { sweepDeliveryLog } from "./delivery-log.js";
export { flowRunJob } from "./flow-run.js";
export { deliverJob } from "./jobs.js";
export { webhookDispatcherService } from "./service.js";
export { type WebhookConfig, webhookSettings } from "./settings.js";
export { forgetWorkspace } from "./workspace-deletions.js";
