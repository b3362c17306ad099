/**
 * What the dev stack, the migrate command, the test harness and the benchmark share: where the services
 * and their migrations are, how to wait for a server, and the demo seed.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { connect as tcpConnect, createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { NatsConnection } from "@nats-io/transport-node";
import { createDb, ensureDatabase, migrate as runMigrations, type MigrationSource } from "@svc/db";
import { JOB_MIGRATIONS } from "@svc/jobs";
import { diagnosticsStream } from "@svc/runtime";
import { seedDemoOperator } from "@svc/service-rbac";
import { seedDemoWorkspace } from "@svc/service-resolver";
import pg from "pg";

/** The repository (or image) root: the nearest folder above this module that holds `services/`. */
function findRoot(start: string): string {
  let dir = start;
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "services"))) return dir;
    dir = dirname(dir);
  }
  return start;
}

export const repoRoot = findRoot(dirname(fileURLToPath(import.meta.url)));

/** The six services, in start order. */
export const SERVICES = [
  "resolver",
  "rbac",
  "plugin-registry",
  "webhook-dispatcher",
  "job-reaper",
  "gateway",
] as const;
export type ServiceDir = (typeof SERVICES)[number];

/**
 * Node's flags for the services, as the image's entrypoint sets them (deploy/Dockerfile), and as make dev
 * and the bench start them: a 4 MB young generation keeps an idle service's resident memory about 25 MB
 * lower (start-up garbage, the route schemas' compilation above all, no longer fills 16 MB semi-spaces);
 * and the old generation grows by 20 % between full collections instead of V8's default of up to 4x, which
 * keeps the gateway at about 150 MB under the benchmark's load instead of about 250 MB (over its 256 Mi
 * limit in the Helm chart with the page cache counted), with no throughput difference the benchmark could
 * see beside its run-to-run noise.
 */
export const SERVICE_NODE_FLAGS = ["--max-semi-space-size=4", "--heap-growing-percent=20"];

/**
 * The services' environment beside their settings, as the image sets it (deploy/Dockerfile `ENV`), and as
 * make dev and the bench start them: glibc's malloc keeps a single arena instead of one per thread that
 * allocates (up to eight per core), so the memory V8's helper threads and libuv's pool once used is not held
 * in arenas of their own. Idle, six services alternating with and without, three runs each (2026-12-02):
 * 2-4 MB less resident each, the gateway about 4 MB (docs/architecture.md, "Memory").
 */
export const SERVICE_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: "1" };

/**
 * Keys made for one run (a benchmark, a chaos run): a token-signing key and a secrets-encryption key, as
 * production requires instead of the built-in development ones.
 */
export function freshKeys(): {
  BackendHost__JwtSigningKey: string;
  BackendHost__SecretsEncryptionKey: string;
} {
  return {
    BackendHost__JwtSigningKey: generateKeyPairSync("ec", { namedCurve: "P-256" })
      .privateKey.export({ type: "pkcs8", format: "pem" })
      .toString(),
    BackendHost__SecretsEncryptionKey: randomBytes(32).toString("base64"),
  };
}

export function migrationSources(): MigrationSource[] {
  return SERVICES.map((service) => ({
    service,
    directory: join(repoRoot, "services", service, "migrations"),
    // A library's tables join the sequence of the service whose schema holds them.
    ...(service === JOB_MIGRATIONS.service ? { alsoFrom: [join(repoRoot, JOB_MIGRATIONS.directory)] } : {}),
  })).filter((s) => existsSync(s.directory));
}

/** Creates the database if needed and applies every service's pending migrations. */
export async function migrateAll(databaseUrl: string) {
  await ensureDatabase(databaseUrl);
  return runMigrations(databaseUrl, migrationSources());
}

/** True when a TCP connection to host:port opens within the timeout. */
export function tcpReachable(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** A port nothing listens on right now (the kernel's choice for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Drops a run's database, closing whatever connections it still has. */
export async function dropDatabase(serverUrl: string, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).catch(() => undefined);
  } finally {
    await admin.end();
  }
}

/** Drops what a benchmark or harness run made for itself: its database and its events stream. */
export async function dropRunResources(o: {
  serverUrl: string;
  database: string;
  natsUrl: string;
  stream: string;
  /** The run's subject prefix: its KV buckets and object stores (`KV_<prefix>_…`, `OBJ_<prefix>_…`) go too. */
  prefix?: string;
}): Promise<void> {
  await dropDatabase(o.serverUrl, o.database);
  const { connect } = await import("@nats-io/transport-node");
  const nc = await connect({ servers: o.natsUrl });
  try {
    await deleteRunStreams(nc, o.stream, o.prefix);
  } finally {
    await nc.close();
  }
}

/**
 * Deletes a run's streams on a shared NATS server: its event stream and, given its subject prefix, the KV
 * buckets, object stores and diagnostics stream the services made under it (left behind, each run's would
 * pile up on the server: about twenty per run).
 */
export async function deleteRunStreams(nc: NatsConnection, stream: string, prefix?: string): Promise<void> {
  await deleteStreams(
    nc,
    (name) =>
      name === stream ||
      (prefix !== undefined &&
        (name.startsWith(`KV_${prefix}_`) ||
          name.startsWith(`OBJ_${prefix}_`) ||
          name === diagnosticsStream(prefix))),
  );
}

/** Deletes the streams whose names `match`: all named first, so that no page of the listing is skipped. */
export async function deleteStreams(nc: NatsConnection, match: (name: string) => boolean): Promise<void> {
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const jsm = await jetstreamManager(nc);
  const names: string[] = [];
  for await (const name of jsm.streams.names()) if (match(name)) names.push(name);
  for (const name of names) await jsm.streams.delete(name).catch(() => undefined);
}

export function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || "127.0.0.1", port: u.port ? Number(u.port) : defaultPort };
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not come up within ${timeoutMs} ms`);
}

/** Errors of a server that is not accepting sessions yet: still starting (57P03), or its port not open. */
const NOT_YET = new Set(["57P03", "ECONNREFUSED", "ECONNRESET"]);

/**
 * Waits until the PostgreSQL server of `databaseUrl` accepts a session (in its maintenance database
 * `postgres`, since the one named may not exist yet). A server's port opens before it accepts sessions:
 * until then it answers SQLSTATE 57P03 ("the database system is starting up"), which is waited out, as
 * is a refused connection. Any other error (credentials, say) is thrown at once.
 */
export async function waitForPostgres(databaseUrl: string, timeoutMs: number): Promise<void> {
  const url = new URL(databaseUrl);
  url.pathname = "/postgres";
  const until = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      await client.query("SELECT 1");
      return;
    } catch (error) {
      const code = (error as { code?: string }).code ?? "";
      if (!NOT_YET.has(code) || Date.now() > until) throw error;
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

export const DEMO = {
  tenantKey: "demo",
  workspaceKey: "default",
  hosts: ["localhost", "127.0.0.1"],
  /** The demo operator (superadmin) of the development stack; never seeded outside development. */
  adminUserName: "admin",
  adminPassword: "admin-dev-password",
} as const;

/**
 * The demo tenant, the visible workspace `default` bound to localhost, and (with `withAdmin`) the demo
 * operator: user `admin` with the superadmin global role and a member of `default` with the admin role.
 * Idempotent.
 */
export async function seedDemo(databaseUrl: string, options: { withAdmin?: boolean } = {}): Promise<void> {
  const db = createDb({ databaseUrl, maximumPoolSize: 1, applicationName: "seed-demo" });
  try {
    await seedDemoWorkspace(db, DEMO);
    if (options.withAdmin) {
      await seedDemoOperator(db, {
        userName: DEMO.adminUserName,
        password: DEMO.adminPassword,
        workspaceKey: DEMO.workspaceKey,
      });
    }
  } finally {
    await db.end();
  }
}
