import { runServiceMain } from "@svc/runtime";

import { rbacService } from "./service.js";

await runServiceMain(rbacService);
