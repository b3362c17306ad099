/**
 * The shared integration harness. Each test file gets its own database (cloned from the run's migrated
 * template), its own subject prefix and its own events stream, so files run in parallel without touching
 * each other; services are started in-process on real NATS and PostgreSQL, and `useHarness()` checks after
 * the file that every service it started was stopped.
 */
import { type Config, parseConfig } from "@svc/config";
import { createLogger } from "@svc/observability";
import { type RunningService, type ServiceDefinition, startService } from "@svc/runtime";
import pg from "pg";
import { afterAll, inject } from "vitest";

import { seedDemo } from "../../scripts/lib/stack.js";
import { DB_PREFIX, STREAM_PREFIX } from "./names.js";

let fileCounter = 0;

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
}

/** Clones the run's migrated template into a new database for this file. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const env = inject("svcTest");
  const suffix = `${process.pid.toString(36)}${(fileCounter++).toString(36)}${Math.random().toString(36).slice(2, 5)}`;
  const name = `${DB_PREFIX}${env.runId}_${suffix}`;
  const admin = new pg.Client({ connectionString: env.adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${env.templateDatabase}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(env.adminUrl);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

export interface Harness {
  readonly db: TestDatabase;
  /** Environment a service of this file runs with (also for child processes). */
  readonly env: Record<string, string>;
  /** The parsed configuration for this file, with optional extra variables. */
  config(extra?: Record<string, string>): Config;
  /** Starts a service in-process; it is stopped by stopAll() or at the end of the file. */
  start(definition: ServiceDefinition, extra?: Record<string, string>): Promise<RunningService>;
  /** Runs SQL against this file's database. */
  sql<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<T[]>;
  stopAll(): Promise<void>;
  readonly running: ReadonlySet<RunningService>;
}

/** Sets up this file's database, names and cleanup. Call once at the top of a test file. */
export async function createHarness(options: { seed?: boolean } = {}): Promise<Harness> {
  const testEnv = inject("svcTest");
  const db = await createTestDatabase();
  if (options.seed ?? true) await seedDemo(db.url);
  const token = `${testEnv.runId}${process.pid.toString(36)}${(fileCounter++).toString(36)}`;
  const env: Record<string, string> = {
    NODE_ENV: "test",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    DATABASE_URL: db.url,
    NATS_URL: testEnv.natsUrl,
    SVC_SUBJECT_PREFIX: `t${token}`,
    SVC_EVENTS_STREAM: `${STREAM_PREFIX}${token.toUpperCase()}`,
    GATEWAY_HOST: "127.0.0.1",
    GATEWAY_PORT: "0",
    DATABASE_POOL_SIZE: "4",
    // Stopping a test's gateway need not wait for a load balancer (the drain has a test of its own).
    SHUTDOWN_DRAIN_DELAY_MS: "0",
    BackendHost__JwtSigningKey: testEnv.jwtSigningKey,
    BackendHost__SecretsEncryptionKey: testEnv.secretsEncryptionKey,
  };
  const running = new Set<RunningService>();
  const config = (extra: Record<string, string> = {}) => parseConfig({ ...env, ...extra });
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const harness: Harness = {
    db,
    env,
    config,
    running,
    async start(definition, extra) {
      const cfg = config(extra);
      const service = await startService(definition, cfg, {
        logger: createLogger(definition.name, cfg.logLevel),
        processMetrics: false,
      });
      const tracked: RunningService = {
        ...service,
        stop: async () => {
          await service.stop();
          running.delete(tracked);
        },
      };
      running.add(tracked);
      return tracked;
    },
    async sql(text, values) {
      return (await client.query(text, values)).rows;
    },
    async stopAll() {
      await Promise.all([...running].map((s) => s.stop()));
    },
  };
  afterAll(async () => {
    const leftOver = [...running].map((s) => s.deps.name);
    await harness.stopAll();
    await client.end();
    for (const s of leftOver) process.emitWarning(`service ${s} was still running at the end of the file`);
    assertNothingLeftRunning(leftOver);
  });
  return harness;
}

/** Fails the file when a test forgot to stop what it started (the harness stops it anyway). */
function assertNothingLeftRunning(leftOver: string[]) {
  if (leftOver.length > 0) {
    throw new Error(`services left running after the tests: ${leftOver.join(", ")}`);
  }
}
