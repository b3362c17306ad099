/**
 * `make bootstrap-operator USERNAME=<name>`: the one-time bootstrap of the first platform operator.
 *
 * Creates the user with the superadmin global role and a random password, printed once. It refuses when a
 * superadmin already exists (further operators are created through the API by that operator), unless
 * `--force` is given. It talks to the database directly (DATABASE_URL), so it works before any service
 * runs, and it needs no API key.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

import { loadConfigOrExit } from "@svc/config";
import { hashPassword } from "@svc/service-rbac";
import pg from "pg";

import { migrateAll } from "./lib/stack.js";

const { values } = parseArgs({
  options: { username: { type: "string" }, force: { type: "boolean", default: false } },
});
const userName = values.username ?? process.env.USERNAME_TO_CREATE;
if (!userName || !/^[A-Za-z0-9._@+-]{1,100}$/.test(userName)) {
  console.error("usage: bootstrap-operator --username <name>   (letters, digits and . _ @ + -)");
  process.exit(2);
}
const config = loadConfigOrExit();
await migrateAll(config.databaseUrl);
const client = new pg.Client({ connectionString: config.databaseUrl });
await client.connect();
try {
  await client.query("BEGIN");
  await client.query(`
    INSERT INTO rbac.roles (name, scope, permissions, source) VALUES ('superadmin', 'platform', '{*}', 'system')
    ON CONFLICT (name) DO NOTHING`);
  const { rowCount } = await client.query("SELECT 1 FROM rbac.users WHERE global_role = 'superadmin'");
  if ((rowCount ?? 0) > 0 && !values.force) {
    console.error(
      "A platform operator exists already: create further operators through the API (or pass --force).",
    );
    await client.query("ROLLBACK");
    process.exit(1);
  }
  const password = randomBytes(18).toString("base64url");
  await client.query(
    `INSERT INTO rbac.users (id, user_name, display_name, password_hash, global_role)
     VALUES ($1, $2, 'Bootstrap operator', $3, 'superadmin')`,
    [randomUUID(), userName, await hashPassword(password)],
  );
  await client.query("COMMIT");
  console.log(`Created platform operator '${userName}' (superadmin).`);
  console.log(`Password (shown once, change it after signing in): ${password}`);
} catch (error) {
  await client.query("ROLLBACK").catch(() => undefined);
  if ((error as { code?: string }).code === "23505") {
    console.error(`A user named '${userName}' exists already.`);
    process.exit(1);
  }
  throw error;
} finally {
  await client.end();
}
