import { runServiceMain } from "@svc/runtime";

import { gatewayService } from "./service.js";

await runServiceMain(gatewayService);
