/**
 * Once per `vitest run`: finds PostgreSQL and NATS (DATABASE_URL / NATS_URL, else the local defaults, else
 * containers via testcontainers), creates this run's migrated template database, and afterwards drops every
 * database and JetStream stream this run created. Names carry a run id, so concurrent runs never collide;
 * leftovers of crashed runs older than six hours are dropped too.
 */
import { execFile } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { promisify } from "node:util";

import { connect } from "@nats-io/transport-node";
import pg from "pg";
import type { TestProject } from "vitest/node";

import { deleteStreams, hostPort, migrateAll, tcpReachable } from "../../scripts/lib/stack.js";
import { DB_PREFIX, STREAM_PREFIX, type TestEnvironment } from "./names.js";
import { startSecureBus } from "./secure-bus.js";

declare module "vitest" {
  export interface ProvidedContext {
    svcTest: TestEnvironment;
  }
}

const STALE_AFTER_MS = 6 * 3_600_000;

async function startContainers(needPostgres: boolean, needNats: boolean) {
  const stops: Array<() => Promise<unknown>> = [];
  const { GenericContainer, Wait } = await import("testcontainers");
  let postgresUrl: string | undefined;
  let natsUrl: string | undefined;
  if (needPostgres) {
    const c = await new GenericContainer("postgres:16-alpine")
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: "trust" })
      .withExposedPorts(5432)
      .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .start();
    postgresUrl = `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`;
    stops.push(() => c.stop());
  }
  if (needNats) {
    const c = await new GenericContainer("nats:2.10-alpine")
      .withCommand(["-js"])
      .withExposedPorts(4222)
      .start();
    natsUrl = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
    stops.push(() => c.stop());
  }
  return { postgresUrl, natsUrl, stop: () => Promise.all(stops.map((s) => s())) };
}

function serverUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.pathname = "/postgres";
  return url.toString();
}

function runIdAge(name: string, prefix: string): number | undefined {
  const stamp = name.slice(prefix.length).split("_")[0];
  const time = stamp ? Number.parseInt(stamp.slice(0, 9), 36) : Number.NaN;
  return Number.isFinite(time) ? Date.now() - time : undefined;
}

async function dropDatabases(adminUrl: string, match: (name: string) => boolean) {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE $1",
      [`${DB_PREFIX}%`],
    );
    for (const { datname } of rows.filter((r) => match(r.datname))) {
      await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => undefined);
    }
  } finally {
    await client.end();
  }
}

async function deleteTestStreams(natsUrl: string, match: (name: string) => boolean) {
  const nc = await connect({ servers: natsUrl });
  try {
    await deleteStreams(nc, (name) => name.startsWith(STREAM_PREFIX) && match(name));
  } finally {
    await nc.close();
  }
}

/** SVC_TEST_BUS: `secure` (the default where nats-server is installed) or `open`. */
async function secureBusWanted(): Promise<boolean> {
  const wanted = process.env.SVC_TEST_BUS ?? "";
  if (wanted === "open") return false;
  const installed = await new Promise<boolean>((resolve) =>
    execFile("nats-server", ["--version"], (error) => resolve(error === null)),
  );
  if (!installed && wanted === "secure") throw new Error("SVC_TEST_BUS=secure needs nats-server on the PATH");
  return installed;
}

export default async function setup(project: TestProject) {
  // Nine base-36 digits of the clock, then randomness: sortable, and unique across concurrent runs.
  const runId = `${Date.now().toString(36).padStart(9, "0")}${Math.random().toString(36).slice(2, 6)}`;
  let databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  let natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
  const pgAddr = hostPort(databaseUrl, 5432);
  const natsAddr = hostPort(natsUrl, 4222);
  const pgUp = await tcpReachable(pgAddr.host, pgAddr.port);
  const natsUp = await tcpReachable(natsAddr.host, natsAddr.port);
  let stopContainers: (() => Promise<unknown>) | undefined;
  if (!pgUp || !natsUp) {
    const started = await startContainers(!pgUp, !natsUp);
    databaseUrl = started.postgresUrl ?? databaseUrl;
    natsUrl = started.natsUrl ?? natsUrl;
    stopContainers = started.stop;
  }
  const adminUrl = serverUrl(databaseUrl);
  const isStale = (name: string, prefix: string) => (runIdAge(name, prefix) ?? 0) > STALE_AFTER_MS;
  await dropDatabases(adminUrl, (name) => isStale(name, DB_PREFIX)).catch(() => undefined);
  // Event streams, and the KV buckets and object stores of test prefixes (`t<runId>…`), of crashed runs.
  // Only names that start with a test prefix: any other stream (a dev stack's) is never touched.
  const runStreams = (name: string) =>
    [STREAM_PREFIX.toLowerCase(), "kv_t", "obj_t"].some(
      (prefix) => name.toLowerCase().startsWith(prefix) && isStale(name.toLowerCase(), prefix),
    );
  await deleteTestStreams(natsUrl, runStreams).catch(() => undefined);

  // The admin console the gateway serves at /admin/ (built from services/gateway/admin, as make build does).
  await promisify(execFile)(process.execPath, [
    new URL("../../scripts/build-admin.mjs", import.meta.url).pathname,
  ]);

  const templateDatabase = `${DB_PREFIX}${runId}_template`;
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${templateDatabase}`;
  await migrateAll(templateUrl.toString());

  const jwtSigningKey = generateKeyPairSync("ec", { namedCurve: "P-256" })
    .privateKey.export({ type: "pkcs8", format: "pem" })
    .toString();
  const secretsEncryptionKey = randomBytes(32).toString("base64");
  // The bus: by default a secure server of this run's own (ADR 0012); SVC_TEST_BUS=open runs the suite on
  // the open one above (the machine's, or a container's where no nats-server is installed).
  const secure = await secureBusWanted();
  const started = secure ? await startSecureBus() : undefined;
  process.stdout.write(
    started
      ? `test bus: ${started.bus.url} (operator mode, TLS with client certificates, a user per service)\n`
      : `test bus: ${natsUrl} (open)\n`,
  );
  project.provide("svcTest", {
    ...(started ? { bus: started.bus } : {}),
    runId,
    adminUrl,
    natsUrl,
    templateDatabase,
    jwtSigningKey,
    secretsEncryptionKey,
  });

  return async () => {
    await dropDatabases(adminUrl, (name) => name.startsWith(`${DB_PREFIX}${runId}_`));
    await deleteTestStreams(
      natsUrl,
      (name) =>
        name.startsWith(`${STREAM_PREFIX}${runId.toUpperCase()}`) ||
        name.startsWith(`KV_t${runId}`) ||
        name.startsWith(`OBJ_t${runId}`),
    );
    const violations = (await started?.stop()) ?? [];
    if (started) {
      // Attacks the tests make are refused here; anything else is a permission a service's user lacks.
      process.stderr.write(
        `test bus: ${violations.length} permission violations refused${violations.length ? ":" : ""}\n${violations
          .map((line) => `  ${line.replace(/^.*?\[ERR\] /, "")}`)
          .join("\n")}\n`,
      );
    }
    await stopContainers?.();
  };
}
