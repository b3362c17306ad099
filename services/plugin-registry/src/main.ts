import { runServiceMain } from "@svc/runtime";

import { pluginRegistryService } from "./service.js";

await runServiceMain(pluginRegistryService);
