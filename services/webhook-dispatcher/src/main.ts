import { runServiceMain } from "@svc/runtime";

import { webhookDispatcherService } from "./service.js";

await runServiceMain(webhookDispatcherService);
