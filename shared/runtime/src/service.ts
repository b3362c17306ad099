import { hostname } from "node:os";

import type { NatsConnection } from "@nats-io/transport-node";
import {
  Bus,
  connectNats,
  ensureEventsStream,
  isNatsAuthError,
  type NatsAuth,
  Provisioner,
  type ProvisionStep,
} from "@svc/bus";
import {
  type BackendHostOf,
  type Config,
  type ConfigOf,
  configOf,
  loadConfigOrExit,
  type SettingsDeclaration,
  settingsToParse,
  type SettingTable,
} from "@svc/config";
import {
  configMessages,
  type MessageImplementation,
  metricsMessages,
  pingMessages,
  type RouteImplementation,
  serveMessages,
  serveRoutes,
  type ServiceContract,
  type ServiceName,
} from "@svc/contracts";
import { createDb, type Db } from "@svc/db";
import { createJobMetrics, type HandlerRegistration, type JobDefinition, JobWorker } from "@svc/jobs";
import {
  createLogger,
  createMetricsRegistry,
  flushTracing,
  type Logger,
  type Registry,
  startTracing,
} from "@svc/observability";

import { HOST_VERSION } from "./build-info.js";
import { DiagnosticsTap } from "./diagnostics.js";
import { KeyedOutcomes, type KeyedWritesMode } from "./keyed-writes.js";
import { LiveSettings } from "./live-settings.js";
import { checkReadiness, type Phase, registerServiceGauges, startManagementServer } from "./management.js";
import { inboxPrefix, storageOf } from "./nats-permissions.js";
import { GatewayPrincipalSigner, PrincipalAssertionVerifier } from "./principal-assertions.js";
import { StorageWatch } from "./storage-watch.js";

/** Everything a service's modules may depend on; passed in, never imported as globals. */
export interface ServiceDeps<D extends AnySettings = AnySettings> {
  readonly name: ServiceName;
  readonly instance: string;
  readonly config: ConfigOf<D>;
  readonly log: Logger;
  readonly nc: NatsConnection;
  readonly bus: Bus;
  readonly db: Db;
  readonly metrics: Registry;
  /**
   * Sets something up on NATS now and again after every reconnect (a restarted server may have lost it):
   * streams, KV buckets, consumers and the watches on them. The step must be idempotent.
   */
  readonly provision: (name: string, step: ProvisionStep) => Promise<void>;
  /**
   * Sets something up again after every reconnect, not now: for what start-up set up its own way (a
   * bucket opened and its handle kept, a watch started on it). The step must be idempotent.
   */
  readonly reprovision: (name: string, step: ProvisionStep) => void;
  /** The settings changed at run time (`PUT /api/config/values`), applied by every replica. */
  readonly live: LiveSettings<BackendHostOf<D>>;
  /** Whether what it keeps in NATS has its copies (reported by `/ready` and a metric). */
  readonly storage: StorageWatch;
}

/** What a service's start function may hand back: work to do when it is told to stop. */
export interface ServiceHooks {
  /** Stop taking new work from outside NATS (an HTTP listener); runs before the bus drains. */
  readonly beforeDrain?: () => Promise<void>;
  /** Stop background loops; runs after the bus drained and before the pool closes. */
  readonly afterDrain?: () => Promise<void>;
  /** Runs once everything is served and the ping answers (e.g. tell followers to read what it serves). */
  readonly afterStart?: () => void;
  /** The base URL of the service's HTTP listener, for the one service that has one (the gateway). */
  readonly httpAddress?: string;
  /** The base URL of the management listener (`/health`, `/ready`, `/metrics`), when MANAGEMENT_PORT is set. */
  readonly managementAddress?: string;
}

/** Any service's settings declaration. */
export type AnySettings = SettingsDeclaration<SettingTable, SettingTable>;

export interface ServiceDefinition<D extends AnySettings = AnySettings> {
  readonly name: ServiceName;
  /** What it serves: its routes and messages (served by the runtime once `start` handed their handlers). */
  readonly contract: ServiceContract;
  /**
   * The service's own settings (`defineSettings`), which its `config` adds to the platform's: the runtime
   * refuses to start it in a process whose configuration did not parse them.
   */
  readonly settings: D;
  /**
   * The service serves its own metrics over HTTP (the gateway, scraped directly): it does not answer
   * `metrics.collect`, whose reply must stay within NATS's payload limit.
   */
  readonly metricsOverHttp?: boolean;
  /**
   * How the outcome of its keyed writes is kept (it owns operator write routes and the table
   * `<schema>.idempotency_outcomes`; ./keyed-writes.ts); absent: not by the service.
   */
  readonly keyedWrites?: KeyedWritesMode;
  /**
   * The service forwards operator requests to the services that own them (the gateway): its bus signs each
   * request's principal with a key of this process, whose public half the runtime publishes.
   */
  readonly signsPrincipals?: boolean;
  /** Registers handlers and starts background work. */
  start(deps: ServiceDeps<D>): Promise<ServiceHooks | undefined> | ServiceHooks | undefined;
}

/**
 * What a service's `start` hands back: a handler for every route and message of its contract (typed by
 * it: one missing, or of the wrong type, does not compile), and its hooks.
 */
export type ServiceImplementation<C extends ServiceContract, J extends JobTypes = NoJobs> = ServiceHooks & {
  readonly routes: RouteImplementation<C["routes"]>;
  readonly messages: MessageImplementation<C["messages"]>;
} & ([keyof J] extends [never] ? { readonly jobs?: undefined } : { readonly jobs: JobImplementation<J> });

/**
 * The job types a service owns, each under its own name (`{ "webhook.deliver": deliverJob }`): only the
 * owner enqueues them, through the definition, so their attempt limits are always the owner's.
 */
export type JobTypes = Readonly<Record<string, JobDefinition<never>>>;
type NoJobs = Readonly<Record<never, JobDefinition<never>>>;
type PayloadOf<T> = T extends JobDefinition<infer P> ? P : never;

/** A handler for every job type the service declares, typed by its payload, with its concurrency. */
export type JobImplementation<J extends JobTypes> = {
  readonly [K in keyof J]: HandlerRegistration<PayloadOf<J[K]>>;
};

/** What a service declares besides its contract. */
export type ServiceSpec<D extends AnySettings, C extends ServiceContract, J extends JobTypes = NoJobs> = Omit<
  ServiceDefinition<D>,
  "name" | "contract" | "start"
> & {
  /**
   * The job types it owns: the runtime runs a job worker for them (leases, polls and the per-workspace
   * limits from the settings `JobLeaseMs`, `JobPollIntervalMs`, `JobWorkspaceConcurrency` and
   * `JobWorkspaceRatePerSecond`), started after `start` and stopped after `beforeDrain`.
   */
  readonly jobs?: J;
  /** Registers background work; answers with the implementation of the contract and the hooks. */
  start(deps: ServiceDeps<D>): Promise<ServiceImplementation<C, J>> | ServiceImplementation<C, J>;
};

/**
 * A service: its contract and its implementation. The runtime serves every route and message of the
 * contract with the handlers `start` answers (decoded, guarded, replies checked in development and tests),
 * then its ping: a replica that answers its ping serves everything.
 */
export function defineService<
  D extends AnySettings,
  const C extends ServiceContract,
  const J extends JobTypes = NoJobs,
>(contract: C, spec: ServiceSpec<D, C, J>): ServiceDefinition<D> {
  const jobTypes = Object.entries(spec.jobs ?? {});
  for (const [name, definition] of jobTypes) {
    if (name !== definition.type) throw new Error(`job type ${definition.type} is declared as ${name}`);
  }
  return {
    ...spec,
    name: contract.name,
    contract,
    async start(deps) {
      const { routes, messages, jobs, ...hooks } = await spec.start(deps);
      serveRoutes(deps.bus, contract.routes, routes);
      serveMessages(deps.bus, contract.messages, messages);
      if (jobTypes.length === 0) return hooks;
      const worker = new JobWorker({
        db: deps.db,
        databaseUrl: deps.config.databaseUrl,
        workerId: deps.instance,
        log: deps.log,
        metrics: createJobMetrics(deps.metrics),
        leaseMs: deps.config.backendHost.jobLeaseMs,
        pollIntervalMs: deps.config.backendHost.jobPollIntervalMs,
        workspaceConcurrency: deps.config.backendHost.jobWorkspaceConcurrency,
        workspaceRate: deps.config.backendHost.jobWorkspaceRatePerSecond,
      });
      const handlers = jobs as Readonly<Record<string, HandlerRegistration<never>>>;
      for (const [name, definition] of jobTypes) {
        const handler = handlers[name];
        if (handler === undefined) throw new Error(`no handler for the job type ${name}`);
        worker.register(definition, handler);
      }
      await worker.start();
      return {
        ...hooks,
        // Running jobs finish (or are released) once the service stopped taking work in.
        beforeDrain: async () => {
          await hooks.beforeDrain?.();
          await worker.stop();
        },
      };
    },
  };
}

export interface RunningService {
  readonly deps: ServiceDeps;
  readonly hooks: ServiceHooks;
  /** Drains and closes everything; resolves when the service holds no resource any more. */
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly logger?: Logger;
  /** Collect default process metrics (off in tests that start several services in one process). */
  readonly processMetrics?: boolean;
}

/** How this process authenticates to NATS, from its settings (NATS_CREDS_FILE, NATS_TLS_*, …). */
export function natsAuthOf(config: Config): NatsAuth {
  return {
    credsFile: config.natsCredsFile,
    nkeySeedFile: config.natsNkeySeedFile,
    token: config.natsToken,
    user: config.natsUser,
    password: config.natsPassword,
    tls: {
      caFile: config.natsTlsCaFile,
      certFile: config.natsTlsCertFile,
      keyFile: config.natsTlsKeyFile,
      serverName: config.natsTlsServerName,
    },
  };
}

/** Exits with status 78 (EX_CONFIG), naming why, when NATS refused the credentials or the TLS. */
function exitOnNatsAuthError(error: unknown, log: Logger): void {
  if (!isNatsAuthError(error)) return;
  log.fatal(
    { error: (error as Error).message },
    "NATS refused this process's credentials or TLS (NATS_CREDS_FILE, NATS_NKEY_SEED_FILE, NATS_TOKEN, NATS_USER, NATS_TLS_*): fix them; retrying will not",
  );
  process.exit(78);
}

/** The `OTEL_*` settings as the tracing setup reads them (the standard variable names). */
function otelEnv(config: Config): Record<string, string | undefined> {
  const v = (value: string | null) => value ?? undefined;
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: v(config.otelExporterOtlpEndpoint),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: v(config.otelExporterOtlpTracesEndpoint),
    OTEL_EXPORTER_OTLP_HEADERS: v(config.otelExporterOtlpHeaders),
    OTEL_EXPORTER_OTLP_PROTOCOL: v(config.otelExporterOtlpProtocol),
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: v(config.otelExporterOtlpTracesProtocol),
    OTEL_TRACES_SAMPLER: v(config.otelTracesSampler),
    OTEL_TRACES_SAMPLER_ARG: v(config.otelTracesSamplerArg),
    OTEL_SERVICE_NAME: v(config.otelServiceName),
    OTEL_RESOURCE_ATTRIBUTES: v(config.otelResourceAttributes),
    OTEL_SDK_DISABLED: v(config.otelSdkDisabled),
    // 0: the batch size that suits the encoding (tracing.ts).
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE:
      config.otelBspMaxExportBatchSize > 0 ? String(config.otelBspMaxExportBatchSize) : undefined,
    OTEL_BSP_SCHEDULE_DELAY: String(config.otelBspScheduleDelay),
    OTEL_BSP_MAX_QUEUE_SIZE: String(config.otelBspMaxQueueSize),
    OTEL_BSP_EXPORT_TIMEOUT: String(config.otelBspExportTimeout),
  };
}

/**
 * Starts one service: connects NATS and PostgreSQL, provisions the events stream, answers
 * `<service>.ping`, then lets the definition register its handlers.
 */
export async function startService<D extends AnySettings>(
  definition: ServiceDefinition<D>,
  platformConfig: Config,
  options: StartOptions = {},
): Promise<RunningService> {
  // The service's own settings are checked to be there (its settings module was imported before the parse).
  const config = configOf(platformConfig, definition.settings);
  const instance = `${definition.name}@${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
  const log = options.logger ?? createLogger(definition.name, config.logLevel);
  // Once per process (a later service in the same process shares it): off without an OTLP endpoint.
  await startTracing(
    { service: definition.name, version: HOST_VERSION, instance },
    otelEnv(config),
    undefined,
    // A request the collector refused (after the exporter's retries), or spans dropped: the spans are lost.
    (err) => log.warn({ err }, "spans not exported"),
  );
  const startedAt = Date.now();
  const nc = await connectNats({
    url: config.natsUrl,
    name: instance,
    logger: log,
    auth: natsAuthOf(config),
    inboxPrefix: inboxPrefix(definition.name),
    coalesceWrites: config.natsCoalesceWrites,
  });
  let db: Db | undefined;
  try {
    db = createDb({
      databaseUrl: config.databaseUrl,
      maximumPoolSize: config.databasePoolSize,
      applicationName: definition.name,
      // Only code and message: node-postgres errors carry the client, with connection parameters.
      onIdleError: (err) =>
        log.warn(
          { code: (err as { code?: string }).code, error: err.message },
          "an idle database connection failed",
        ),
    });
    const provisioner = new Provisioner(nc, log);
    await provisioner.add("events stream", () =>
      ensureEventsStream(nc, {
        name: config.eventsStream,
        prefix: config.subjectPrefix,
        replicas: config.backendHost.natsReplicas,
      }),
    );
    // Operator route requests are acted on only with the principal the gateway signed.
    const principals = new PrincipalAssertionVerifier(
      nc,
      config.subjectPrefix,
      config.backendHost.natsReplicas,
      log,
    );
    await provisioner.add("principal keys watch", () => principals.start());
    const signer = definition.signsPrincipals
      ? new GatewayPrincipalSigner(nc, config.subjectPrefix, config.backendHost.natsReplicas)
      : undefined;
    if (signer !== undefined) await provisioner.add("principal signing key", () => signer.publish());
    const bus = new Bus({
      nc,
      prefix: config.subjectPrefix,
      service: definition.name,
      logger: log,
      defaultTimeoutMs: config.backendHost.requestTimeoutMs,
      // `nats micro ls/info/stats` list this replica, its endpoints and their error counts.
      micro: { version: HOST_VERSION, description: `svc ${definition.name}` },
      principalVerifier: principals,
      principalSigner: signer,
      keyedWrites:
        definition.keyedWrites === undefined
          ? undefined
          : new KeyedOutcomes(db, definition.name.replaceAll("-", "_"), definition.keyedWrites),
    });
    const metrics = createMetricsRegistry(definition.name, options.processMetrics ?? true);
    // `starting` until every handler is in place, `draining` from SIGTERM on: both are not ready.
    let phase: Phase = "starting";
    const pool = db;
    const storage = new StorageWatch(
      nc,
      storageOf(definition.name, { prefix: config.subjectPrefix, eventsStream: config.eventsStream }),
      metrics,
    );
    storage.start();
    const readiness = () => checkReadiness(pool, nc, phase, 1_000, storage);
    registerServiceGauges(metrics, readiness);
    const live = new LiveSettings<BackendHostOf<D>>(
      config,
      config.backendHost,
      log,
      settingsToParse([definition.settings]),
    );
    await provisioner.add("run-time settings watch", () =>
      live.start(nc, config.subjectPrefix, config.backendHost.natsReplicas),
    );
    const tap = new DiagnosticsTap({
      service: definition.name,
      instance,
      prefix: config.subjectPrefix,
      replicas: config.backendHost.natsReplicas,
      db,
      bus,
      log,
    });
    await provisioner.add("diagnostics watch", () => tap.start(nc));
    serveMessages(bus, configMessages, {
      describe: () => ({ service: definition.name, settings: live.describe() }),
      check: ({ values }) => ({ service: definition.name, ...live.check(values) }),
    });
    const deps: ServiceDeps<D> = {
      name: definition.name,
      instance,
      config,
      log,
      nc,
      bus,
      db,
      metrics,
      provision: (name, step) => provisioner.add(name, step),
      reprovision: (name, step) => provisioner.afterReconnect(name, step),
      live,
      storage,
    };
    if (definition.metricsOverHttp !== true) {
      serveMessages(bus, metricsMessages, {
        collect: async () => ({
          service: definition.name,
          instance,
          metrics: await metrics.getMetricsAsJSON(),
        }),
      });
    }
    const management =
      config.managementPort === null
        ? undefined
        : await startManagementServer({
            service: definition.name,
            port: config.managementPort,
            host: config.managementHost,
            readiness,
            metrics,
            log,
          });
    let hooks: ServiceHooks;
    try {
      hooks = (await definition.start(deps)) ?? {};
    } catch (error) {
      await management?.close();
      throw error;
    }
    // Last: a replica that answers its ping has every handler in place.
    serveMessages(bus, pingMessages(definition.name), {
      ping: () => ({
        service: definition.name,
        instance,
        version: HOST_VERSION,
        uptimeMs: Date.now() - startedAt,
      }),
    });
    // The server has every subscription before the service says it is up: a request sent right after
    // finds its handler (the SUBs are otherwise still in the client's buffer).
    await nc.flush();
    phase = "running";
    hooks.afterStart?.();
    if (management !== undefined) hooks = { ...hooks, managementAddress: management.address };
    log.info({ instance }, "service started");
    let stopping: Promise<void> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        log.info("service stopping");
        phase = "draining";
        provisioner.stop();
        principals.stop();
        signer?.stop();
        live.stop();
        tap.stop();
        storage.stop();
        await hooks.beforeDrain?.();
        await bus.drain();
        await hooks.afterDrain?.();
        await deps.db.end();
        await management?.close();
        // The spans of the last requests are exported before the process ends.
        await flushTracing().catch(() => undefined);
        log.info("service stopped");
      })();
      return stopping;
    };
    return { deps, hooks, stop };
  } catch (error) {
    await db?.end().catch(() => undefined);
    await nc.close().catch(() => undefined);
    throw error;
  }
}

/**
 * The body of every service's `main.ts`: parse the configuration (exit 78 on a bad one), start, and on
 * SIGTERM or SIGINT drain and exit within the shutdown timeout (forced exit 1 past it).
 */
export async function runServiceMain(definition: ServiceDefinition): Promise<void> {
  const config = loadConfigOrExit(process.env, { settings: [definition.settings] });
  const log = createLogger(definition.name, config.logLevel);
  let running: RunningService | undefined;
  let signalled = false;
  const stopAndExit = (service: RunningService) => {
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  // Installed before start: a signal during start-up stops the service as soon as it is up.
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = true;
    log.info({ signal }, "shutdown requested");
    const force = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs }, "shutdown timed out, exiting");
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    if (running !== undefined) stopAndExit(running);
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  try {
    running = await startService(definition, config, { logger: log });
  } catch (error) {
    exitOnNatsAuthError(error, log);
    log.fatal({ err: error }, "service failed to start");
    process.exit(1);
  }
  // Refused on a reconnect (credentials revoked or expired): nats.js gives up and closes; so does this.
  void running.deps.nc.closed().then((error) => {
    if (error instanceof Error && !signalled) exitOnNatsAuthError(error, log);
  });
  if (signalled) stopAndExit(running);
}
