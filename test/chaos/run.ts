/**
 * What a chaos run owns and how it speaks: its stamp, its own database on the server of DATABASE_URL
 * (`<prefix><stamp>`), its work directory with a logs folder, and its progress lines.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import pg from "pg";

import { freshKeys, migrateAll, seedDemo } from "../../scripts/lib/stack.js";
import { instrumentJobWrites } from "./jobs-audit.js";

export function chaosRun(label: string, databasePrefix: string) {
  const t0 = Date.now();
  const say = (message: string) =>
    process.stdout.write(`[${label} +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${message}\n`);
  const stamp = `${new Date().toISOString().replace(/\D/g, "").slice(0, 14)}_${randomBytes(2).toString("hex")}`;
  const dbName = `${databasePrefix}${stamp}`;
  const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
  serverUrl.pathname = "/postgres";
  const dbUrl = new URL(serverUrl);
  dbUrl.pathname = `/${dbName}`;
  const workDir = mkdtempSync(join(tmpdir(), `svc-${label}-`));
  const logDir = join(workDir, "logs");
  mkdirSync(logDir);
  return { t0, say, stamp, dbName, serverUrl, dbUrl, workDir, logDir };
}

/** Polls every 100 ms until `check` holds; the time it first held, or undefined after `timeoutMs`. */
export async function pollUntil(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<number | undefined> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return Date.now();
    if (Date.now() > end) return undefined;
    await sleep(100, undefined, { signal });
  }
}

/**
 * What every service process of a chaos run gets: its database, NATS, subject prefix and stream, fresh
 * keys, the local receiver allowed as a webhook target, short job leases and quick polls and sweeps (so
 * that work a killed process held is taken over within seconds).
 */
export function chaosServiceEnv(o: {
  readonly databaseUrl: string;
  readonly natsUrl: string;
  readonly prefix: string;
  readonly stream: string;
  readonly leaseMs: number;
}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    NODE_ENV: "test",
    DATABASE_URL: o.databaseUrl,
    DATABASE_POOL_SIZE: "4",
    NATS_URL: o.natsUrl,
    GATEWAY_HOST: "127.0.0.1",
    SVC_SUBJECT_PREFIX: o.prefix,
    SVC_EVENTS_STREAM: o.stream,
    ...freshKeys(),
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
    BackendHost__JobLeaseMs: String(o.leaseMs),
    BackendHost__JobPollIntervalMs: "200",
    BackendHost__JobReaperIntervalMs: "500",
  };
}

/** The run's database, migrated and seeded (demo workspace and operator), and its job writes audited. */
export async function preparedDatabase(dbUrl: URL, applicationName: string): Promise<pg.Client> {
  await migrateAll(dbUrl.toString());
  await seedDemo(dbUrl.toString(), { withAdmin: true });
  const db = new pg.Client({ connectionString: dbUrl.toString(), application_name: applicationName });
  await db.connect();
  await instrumentJobWrites(db);
  return db;
}
