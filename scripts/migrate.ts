/** `make migrate`: creates the database when missing and applies every service's pending migrations. */
import { loadConfigOrExit } from "@svc/config";

import { migrateAll } from "./lib/stack.js";

const config = loadConfigOrExit(process.env, { tool: true });
const applied = await migrateAll(config.databaseUrl);
if (applied.length === 0) console.log("migrate: database is up to date");
for (const m of applied)
  console.log(`migrate: applied ${m.service}/${String(m.version).padStart(4, "0")}_${m.name}`);
