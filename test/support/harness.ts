/**
 * The shared integration harness. Each test file gets its own database (cloned from the run's migrated
 * template), its own subject prefix and its own events stream, so files run in parallel without touching
 * each other; services are started in-process on real NATS and PostgreSQL, and `useHarness()` checks after
 * the file that every service it started was stopped.
 */
import type { ConnectionOptions } from "@nats-io/transport-node";
import { type NatsAuth, natsAuthOptions } from "@svc/bus";
import { type Config, parseConfig } from "@svc/config";
import type { ServiceName } from "@svc/contracts";
import { createLogger } from "@svc/observability";
import { type RunningService, SERVICE_NEEDS, type ServiceDefinition, startService } from "@svc/runtime";
import pg from "pg";
import { afterAll, inject, onTestFinished } from "vitest";

import { ALL_SERVICE_SETTINGS } from "../../scripts/lib/service-settings.js";
import { seedDemo } from "../../scripts/lib/stack.js";
import { DB_PREFIX, STREAM_PREFIX } from "./names.js";
import { BUS_SETTINGS, fileUsers } from "./secure-bus.js";

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
  /**
   * Environment a service of this file runs with (also for child processes). On the secure bus it carries
   * TLS and the unlimited test user; `start` gives each service its own user instead.
   */
  readonly env: Record<string, string>;
  /** How a test's own NATS client connects to the file's bus (credentials and TLS, none on an open bus). */
  readonly natsAuth: NatsAuth | undefined;
  /** nats.js options of a test's own client: the servers, credentials and TLS. */
  natsOptions(extra?: Partial<ConnectionOptions>): ConnectionOptions;
  /**
   * A URL that reaches the file's bus another way (a TCP proxy in front of it): the scheme to use, and
   * processes given it keep the bus's credentials and TLS.
   */
  busVia(port: number): string;
  /** `h.env` with `extra`; none of the bus settings when `extra` names a NATS server of the test's own. */
  envWith(extra: Record<string, string>): Record<string, string>;
  /** `h.env` with a service's own user in place of the test user (a child process running that service). */
  envFor(service: ServiceName, extra?: Record<string, string>): Promise<Record<string, string>>;
  /** The parsed configuration for this file, with optional extra variables. */
  config(extra?: Record<string, string>): Config;
  /**
   * Starts a service in-process; it is stopped by stopAll() or at the end of the file. `logTo` receives its
   * log lines (JSON), for tests that read what a service logged.
   */
  start(
    definition: ServiceDefinition,
    extra?: Record<string, string>,
    options?: { readonly logTo?: { write(line: string): void } },
  ): Promise<RunningService>;
  /**
   * `start` for one test: the service is stopped when the test finishes, passed or failed, so a failure
   * does not leave it consuming the next test's events. Call it inside a test.
   */
  startForTest(definition: ServiceDefinition, extra?: Record<string, string>): Promise<RunningService>;
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
    // Passwords hashed in about a millisecond, not a tenth of a second: the suite hashes hundreds.
    BackendHost__PasswordHashCost: "10",
    // No plugin process started in advance: most files activate no plugin, and each spare is a Node
    // process to boot (test/plugin-runtime.test.ts and the pool's unit test keep the default's two).
    BackendHost__PluginSpareProcesses: "0",
    BackendHost__SecretsEncryptionKey: testEnv.secretsEncryptionKey,
  };
  const users = testEnv.bus ? await fileUsers(testEnv.bus) : undefined;
  Object.assign(env, users?.env);
  const natsAuth: NatsAuth | undefined = users
    ? {
        credsFile: env.NATS_CREDS_FILE ?? null,
        tls: {
          caFile: env.NATS_TLS_CA_FILE ?? null,
          certFile: env.NATS_TLS_CERT_FILE ?? null,
          keyFile: env.NATS_TLS_KEY_FILE ?? null,
          serverName: env.NATS_TLS_SERVER_NAME ?? null,
        },
      }
    : undefined;
  /**
   * The environment of a process with `extra`: a test that points it at a NATS server of its own (another
   * NATS_URL) gets none of the file's bus settings, only its own.
   */
  const sameBus = new Set([env.NATS_URL]);
  const merged = (extra: Record<string, string> = {}) => {
    const base = { ...env };
    if (extra.NATS_URL !== undefined && !sameBus.has(extra.NATS_URL))
      for (const name of BUS_SETTINGS) delete base[name];
    return { ...base, ...extra };
  };
  /** With the service's own user on the secure bus, unless `extra` brings credentials of its own. */
  const asService = async (service: string, extra: Record<string, string> = {}) => {
    const all = merged(extra);
    const ownCredentials = ["NATS_CREDS_FILE", "NATS_NKEY_SEED_FILE", "NATS_TOKEN", "NATS_USER"].some(
      (name) => extra[name] !== undefined,
    );
    if (users === undefined || !sameBus.has(all.NATS_URL) || ownCredentials || !(service in SERVICE_NEEDS))
      return all;
    const creds = await users.serviceCreds(
      service as ServiceName,
      all.SVC_SUBJECT_PREFIX as string,
      all.SVC_EVENTS_STREAM as string,
    );
    return { ...all, NATS_CREDS_FILE: creds };
  };
  const running = new Set<RunningService>();
  const config = (extra: Record<string, string> = {}) =>
    parseConfig(merged(extra), { settings: ALL_SERVICE_SETTINGS });
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const harness: Harness = {
    db,
    env,
    natsAuth,
    natsOptions: (extra = {}) => ({ servers: env.NATS_URL, ...natsAuthOptions(natsAuth), ...extra }),
    envFor: (service, extra) => asService(service, extra),
    envWith: merged,
    busVia(port) {
      const url = `${new URL(env.NATS_URL as string).protocol}//127.0.0.1:${port}`;
      sameBus.add(url);
      return url;
    },
    config,
    running,
    async start(definition, extra, options) {
      const cfg = parseConfig(await asService(definition.name, extra), { settings: [definition.settings] });
      const service = await startService(definition, cfg, {
        logger: createLogger(definition.name, cfg.logLevel, options?.logTo),
        processMetrics: false,
      });
      const tracked: RunningService = {
        ...service,
        stop: async () => {
          // Once: a test's own stop and its end (startForTest) may both ask.
          if (!running.delete(tracked)) return;
          await service.stop();
        },
      };
      running.add(tracked);
      return tracked;
    },
    async startForTest(definition, extra) {
      const service = await harness.start(definition, extra);
      onTestFinished(() => service.stop());
      return service;
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
