import { runServiceMain } from "@svc/runtime";

import { jobReaperService } from "./service.js";

await runServiceMain(jobReaperService);
