/**
 * `make bootstrap-operator USERNAME=<name>`: the one-time bootstrap of the first platform operator.
 *
 * Creates the user with the superadmin global role and a random password, printed once. It refuses when a
 * superadmin already exists (further operators are created through the API by that operator), unless
 * `--force` is given. It runs rbac's own bootstrap (services/rbac/src/seed.ts) on the database directly
 * (DATABASE_URL), so it works before any service runs, and it needs no API key.
 */
import { parseArgs } from "node:util";

import { loadConfigOrExit } from "@svc/config";
import { createDb } from "@svc/db";
import { ConflictError } from "@svc/errors";
import { bootstrapOperator } from "@svc/service-rbac";

import { migrateAll } from "./lib/stack.js";

const { values } = parseArgs({
  options: { username: { type: "string" }, force: { type: "boolean", default: false } },
});
const userName = values.username ?? process.env.USERNAME_TO_CREATE;
if (!userName || !/^[A-Za-z0-9._@+-]{1,100}$/.test(userName)) {
  console.error("usage: bootstrap-operator --username <name>   (letters, digits and . _ @ + -)");
  process.exit(2);
}
const config = loadConfigOrExit(process.env, { tool: true });
await migrateAll(config.databaseUrl);
const db = createDb({ databaseUrl: config.databaseUrl, maximumPoolSize: 1, applicationName: "bootstrap" });
try {
  const { password } = await bootstrapOperator(db, userName, { force: values.force });
  console.log(`Created platform operator '${userName}' (superadmin).`);
  console.log(`Password (shown once, change it after signing in): ${password}`);
} catch (error) {
  if (!(error instanceof ConflictError)) throw error;
  console.error(error.message);
  process.exitCode = 1;
} finally {
  await db.end();
}
