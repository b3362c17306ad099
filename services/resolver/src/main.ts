import { runServiceMain } from "@svc/runtime";

import { resolverService } from "./service.js";

await runServiceMain(resolverService);
