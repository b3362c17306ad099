/**
 * The configuration: the platform's settings (declared here) and each service's (declared in its own
 * `settings.ts`), parsed once from the environment into a frozen object. `Config` types the platform's;
 * a service reads `ConfigOf<typeof its settings>` (`configOf` checks the parse read them).
 */
import { accessSync, constants } from "node:fs";

import { type Env, Reader, SUBJECT_TOKEN, urlCheck } from "./reader.js";
import { buildSettingTree, getSettingArray, type SettingTree } from "./settings-tree.js";
import {
  type AnySettingsDeclaration,
  defineSettings,
  setting,
  type SettingsDeclaration,
  type SettingsOf,
  type SettingTable,
} from "./table.js";

export const NodeEnv = { Development: "development", Test: "test", Production: "production" } as const;
export type NodeEnv = (typeof NodeEnv)[keyof typeof NodeEnv];

export const LogLevel = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LogLevel)[number];

export const DEVELOPMENT_SECRETS_KEY = Buffer.from("svc-development-secrets-key-0000").toString("base64");

/**
 * The well-known development signing key and API key. They exist so that `make dev` and the tests work
 * with no set-up; parseConfig refuses them in every mode but development (tests make their own).
 */
export const DEVELOPMENT_JWT_SIGNING_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6orW49KfUrgpQakd
jF56beH45fBmz8ZJ3+Chbc5efl+hRANCAAQA3taoJgx9hilwTS45wRoBPlqq267D
MF54wT8cQho9pPTolyyTww//zEXbZihe/h6ctJUau0skpNLT4irzDe+8
-----END PRIVATE KEY-----
`;
export const DEVELOPMENT_API_KEY = "svc-dev-bootstrap-key-change-me";

/** How NATS is connected to: at most one way to authenticate, and TLS. */
const NATS_AUTH = ["NATS_CREDS_FILE", "NATS_NKEY_SEED_FILE", "NATS_TOKEN", "NATS_USER"] as const;

function checkNatsConnection(config: Record<string, unknown>, problems: string[]): void {
  const given = (key: string) => config[key] !== null && config[key] !== undefined;
  const auth = [
    ["NATS_CREDS_FILE", "natsCredsFile"],
    ["NATS_NKEY_SEED_FILE", "natsNkeySeedFile"],
    ["NATS_TOKEN", "natsToken"],
    ["NATS_USER", "natsUser"],
  ].filter(([, key]) => given(key as string));
  if (auth.length > 1) {
    problems.push(
      `${auth.map(([name]) => name).join(", ")}: set one way to authenticate to NATS (${NATS_AUTH.join(", ")})`,
    );
  }
  if (given("natsPassword") && !given("natsUser")) problems.push("NATS_PASSWORD: needs NATS_USER");
  if (given("natsUser") && !given("natsPassword")) problems.push("NATS_USER: needs NATS_PASSWORD");
  if (given("natsTlsCertFile") !== given("natsTlsKeyFile")) {
    problems.push(
      "NATS_TLS_CERT_FILE, NATS_TLS_KEY_FILE: a client certificate needs its key, and the key its certificate",
    );
  }
  for (const [name, key] of [
    ["NATS_CREDS_FILE", "natsCredsFile"],
    ["NATS_NKEY_SEED_FILE", "natsNkeySeedFile"],
    ["NATS_TLS_CA_FILE", "natsTlsCaFile"],
    ["NATS_TLS_CERT_FILE", "natsTlsCertFile"],
    ["NATS_TLS_KEY_FILE", "natsTlsKeyFile"],
  ] as const) {
    const path = config[key];
    if (typeof path !== "string") continue;
    try {
      accessSync(path, constants.R_OK);
    } catch {
      problems.push(`${name}: cannot read the file '${path}'`);
    }
  }
}

/** Settings every process reads: where NATS and PostgreSQL are, naming, logging, identity, the job engine. */
export const platformSettings = defineSettings({
  owner: "platform",
  top: {
    // Development rules (the built-in keys, unsigned plugins) only when asked for by name: a process
    // started without NODE_ENV gets production rules.
    nodeEnv: setting.oneOf(
      "NODE_ENV",
      NodeEnv.Production,
      Object.values(NodeEnv),
      "`development`, `test` or `production`; development rules (the built-in keys, unsigned plugins) apply only with `development` set explicitly (`make dev` does)",
    ),
    logLevel: setting.oneOf("LOG_LEVEL", "info", LogLevel, "pino level (`fatal` … `trace`, `silent`)"),
    // Tracing (docs/adr/0017-tracing.md): the standard OpenTelemetry variables; off without an endpoint.
    otelExporterOtlpEndpoint: setting.optionalString(
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTLP/HTTP collector base URL (`/v1/traces` is added); tracing is off when neither this nor `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set",
    ),
    otelExporterOtlpTracesEndpoint: setting.optionalString(
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      "OTLP/HTTP traces URL, used as is (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`)",
    ),
    otelExporterOtlpProtocol: setting.optionalString(
      "OTEL_EXPORTER_OTLP_PROTOCOL",
      "`http/protobuf` (default) or `http/json`",
    ),
    otelExporterOtlpTracesProtocol: setting.optionalString(
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
      "the traces' own protocol, `http/protobuf` or `http/json` (wins over `OTEL_EXPORTER_OTLP_PROTOCOL`)",
    ),
    otelExporterOtlpHeaders: setting.optionalString(
      "OTEL_EXPORTER_OTLP_HEADERS",
      "headers sent with each export, `name=value,…` (URL-encoded values), e.g. a collector's API key",
      { secret: true },
    ),
    otelTracesSampler: setting.optionalString(
      "OTEL_TRACES_SAMPLER",
      "`parentbased_always_on` (default), `parentbased_traceidratio`, `traceidratio`, `always_on`, `always_off`, `parentbased_always_off`",
    ),
    otelTracesSamplerArg: setting.optionalString(
      "OTEL_TRACES_SAMPLER_ARG",
      "the ratio of a `traceidratio` sampler, 0 to 1 (`0.1`: one trace in ten)",
    ),
    otelServiceName: setting.optionalString(
      "OTEL_SERVICE_NAME",
      "`service.name` of the spans (default: the service's own name)",
    ),
    otelResourceAttributes: setting.optionalString(
      "OTEL_RESOURCE_ATTRIBUTES",
      "more resource attributes, `key=value,…` (the chart sets `k8s.pod.name` and `k8s.namespace.name`)",
    ),
    otelSdkDisabled: setting.optionalString(
      "OTEL_SDK_DISABLED",
      "`true` turns tracing off whatever else is set",
    ),
    otelBspMaxExportBatchSize: setting.int(
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
      0,
      0,
      1_000_000,
      "spans handed to the exporter at a time (0: 32 with protobuf, serialised at once and joined into requests of up to 512; 512 with JSON)",
    ),
    otelBspScheduleDelay: setting.int(
      "OTEL_BSP_SCHEDULE_DELAY",
      5_000,
      1,
      3_600_000,
      "the longest a span waits for its batch, ms",
    ),
    otelBspMaxQueueSize: setting.int(
      "OTEL_BSP_MAX_QUEUE_SIZE",
      2_048,
      1,
      1_000_000,
      "spans held waiting to be exported; past it new spans are dropped",
    ),
    otelBspExportTimeout: setting.int(
      "OTEL_BSP_EXPORT_TIMEOUT",
      30_000,
      1,
      3_600_000,
      "the longest one batch's export may take, ms",
    ),
    natsUrl: setting.string("NATS_URL", "nats://127.0.0.1:4222", "NATS server(s), comma-separated", {
      check: (v) =>
        v.split(",").every((u) => urlCheck(["nats:", "tls:", "ws:", "wss:"])(u.trim()) === null)
          ? null
          : "expected nats:// URL(s), comma-separated",
    }),
    natsCredsFile: setting.optionalString(
      "NATS_CREDS_FILE",
      "NATS credentials file (`.creds`: a user JWT and its nkey seed; decentralized auth), read at every (re)connect",
    ),
    natsNkeySeedFile: setting.optionalString(
      "NATS_NKEY_SEED_FILE",
      "file holding an nkey seed (`SU…`) to authenticate with",
    ),
    natsToken: setting.optionalString("NATS_TOKEN", "token to authenticate to NATS with", { secret: true }),
    natsUser: setting.optionalString(
      "NATS_USER",
      "user name to authenticate to NATS with (with NATS_PASSWORD)",
    ),
    natsPassword: setting.optionalString("NATS_PASSWORD", "password of NATS_USER", { secret: true }),
    natsTlsCaFile: setting.optionalString(
      "NATS_TLS_CA_FILE",
      "CA certificate(s) (PEM) the NATS server's certificate must chain to; any NATS_TLS_* turns TLS on",
    ),
    natsTlsCertFile: setting.optionalString(
      "NATS_TLS_CERT_FILE",
      "client certificate (PEM) for NATS servers that verify clients",
    ),
    natsTlsKeyFile: setting.optionalString("NATS_TLS_KEY_FILE", "the client certificate's private key (PEM)"),
    natsTlsServerName: setting.optionalString(
      "NATS_TLS_SERVER_NAME",
      "name the NATS server's certificate must carry, when it is not the host in NATS_URL",
    ),
    natsCoalesceWrites: setting.bool(
      "NATS_COALESCE_WRITES",
      true,
      "send a turn of the event loop's first NATS message at once and what the rest of the turn queued in one socket write (under load, the requests of many HTTP connections in one system call); `false`: one write per message, as nats.js does",
    ),
    databaseUrl: setting.string(
      "DATABASE_URL",
      "postgres://postgres@127.0.0.1:5432/svc",
      "PostgreSQL database (created by `make dev`/`make migrate` when missing); may hold a password",
      {
        check: urlCheck(["postgres:", "postgresql:"]),
        secret: true,
        defaultText: "`postgres://postgres@127.0.0.1:5432/svc`",
      },
    ),
    databasePoolSize: setting.int("DATABASE_POOL_SIZE", 10, 1, 500, "connections per service process"),
    subjectPrefix: setting.string("SVC_SUBJECT_PREFIX", "svc", "first token of every NATS subject", {
      check: (v) => (SUBJECT_TOKEN.test(v) ? null : "expected one subject token (letters, digits, _ and -)"),
    }),
    eventsStream: setting.string(
      "SVC_EVENTS_STREAM",
      "SVC_EVENTS",
      "JetStream stream holding `<prefix>.events.>`",
      {
        check: (v) => (SUBJECT_TOKEN.test(v) ? null : "expected a stream name (letters, digits, _ and -)"),
      },
    ),
    managementHost: setting.string("MANAGEMENT_HOST", "0.0.0.0", "address the management listener binds"),
    managementPort: setting.custom<number | null>({
      name: "MANAGEMENT_PORT",
      doc: "port of the service's management listener (`/health`, `/ready`, `/metrics` for probes and a per-pod scrape); unset: none, 0: any free port",
      defaultText: "unset",
      secret: false,
      type: "integer",
      read: (r) =>
        r.optionalString("MANAGEMENT_PORT") === null ? null : r.int("MANAGEMENT_PORT", 0, 0, 65_535),
    }),
    shutdownTimeoutMs: setting.int(
      "SHUTDOWN_TIMEOUT_MS",
      10_000,
      100,
      600_000,
      "SIGTERM drain limit before a forced exit",
    ),
  },
  backendHost: {
    natsReplicas: setting.int(
      "BackendHost:NatsReplicas",
      1,
      1,
      5,
      "copies of every JetStream stream, key-value bucket and object store the platform keeps (1 on a single server; 3 on a three-node cluster, so one node can be lost); applied at creation and to existing ones at start",
    ),
    requestTimeoutMs: setting.int(
      "BackendHost:RequestTimeoutMs",
      5_000,
      10,
      600_000,
      "deadline of a request from one service to another, e.g. gateway → owning service (then 504)",
    ),
    problemsBaseUrl: setting.string(
      "BackendHost:ProblemsBaseUrl",
      "/problems",
      "base of problem-document `type` URLs",
    ),
    jwtIssuer: setting.string(
      "BackendHost:JwtIssuer",
      "svc",
      "`iss` of issued tokens (rbac signs, the gateway checks)",
    ),
    accessTokenLifetimeSeconds: setting.int(
      "BackendHost:AccessTokenLifetimeSeconds",
      3_600,
      30,
      7 * 86_400,
      "access-token lifetime (and how long a revocation is remembered)",
    ),
    jobLeaseMs: setting.int("BackendHost:JobLeaseMs", 300_000, 100, 86_400_000, "lease a job claim grants"),
    jobPollIntervalMs: setting.int(
      "BackendHost:JobPollIntervalMs",
      2_000,
      50,
      3_600_000,
      "job workers' backstop poll for scheduled and retried jobs",
    ),
    jobWorkspaceConcurrency: setting.int(
      "BackendHost:JobWorkspaceConcurrency",
      0,
      0,
      10_000,
      "most jobs of one type one workspace runs at once in one service replica (0: no limit but the type's own)",
    ),
    jobWorkspaceRatePerSecond: setting.int(
      "BackendHost:JobWorkspaceRatePerSecond",
      0,
      0,
      1_000_000,
      "most jobs of one type one workspace starts per second in one service replica, spread over the second (0: no limit): a quota that keeps one workspace's backlog from taking the whole machine",
    ),
  },
  check: checkNatsConnection,
});

/** The platform's settings of the `BackendHost:*` form, which every process reads. */
export interface BackendHostSettings extends SettingsOf<typeof platformSettings.backendHost> {}

/** The platform's configuration, which every process reads; a service's own is `ConfigOf` its table. */
export interface Config extends SettingsOf<typeof platformSettings.top> {
  readonly backendHost: BackendHostSettings;
  /** Every `X__Y` variable as a case-insensitive tree, for settings read by later features. */
  readonly settings: SettingTree;
}

/**
 * The configuration a service reads: the platform's and its own settings (`defineSettings`), never another
 * service's, which a process that does not start that service has not parsed.
 */
export type ConfigOf<D extends SettingsDeclaration<SettingTable, SettingTable>> = Config &
  SettingsOf<D["top"]> & { readonly backendHost: BackendHostOf<D> };

/** The `BackendHost:*` settings a service reads: the platform's and its own. */
export type BackendHostOf<D extends SettingsDeclaration<SettingTable, SettingTable>> = BackendHostSettings &
  SettingsOf<D["backendHost"]>;

/**
 * The configuration as a service reads it (the platform's and `declaration`'s settings), checked: throws
 * when the parse did not read the declaration's settings (its module was not imported before the parse).
 */
export function configOf<C extends Config, D extends SettingsDeclaration<SettingTable, SettingTable>>(
  config: C,
  declaration: D,
): C & ConfigOf<D> {
  const missing = [
    ...Object.keys(declaration.top).filter((key) => !(key in config)),
    ...Object.keys(declaration.backendHost).filter((key) => !(key in config.backendHost)),
  ];
  if (missing.length > 0) {
    throw new Error(`the configuration lacks ${declaration.owner}'s settings (${missing.join(", ")})`);
  }
  // Checked just above: every setting of the declaration is there.
  return config as C & ConfigOf<D>;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/**
 * How to parse: which settings beside the platform's, and for whom.
 */
export interface ParseOptions {
  /**
   * The settings of the services this process starts (or documents), beside the platform's, which every
   * parse reads. The configuration holds these and no other.
   */
  readonly settings?: readonly AnySettingsDeclaration[];
  /**
   * A tool that runs no service (`make migrate`, the bootstrap of the first operator): the services'
   * own checks (their keys, which such a tool never uses) are skipped; the platform's still apply.
   */
  readonly tool?: boolean;
}

/**
 * The declarations a parse reads: the platform's first, then the given ones, each owner once.
 */
export function settingsToParse(settings: readonly AnySettingsDeclaration[] = []): AnySettingsDeclaration[] {
  const out = new Map<string, AnySettingsDeclaration>([[platformSettings.owner, platformSettings]]);
  for (const d of settings) out.set(d.owner, d);
  return [...out.values()];
}

/**
 * Parses the environment once into a typed, frozen configuration, from the platform's settings and those
 * given. Throws ConfigError listing every bad variable; the service entry points print it and exit 78.
 */
export function parseConfig(env: Env = process.env, options: ParseOptions = {}): Config {
  const { tree } = buildSettingTree(env);
  const r = new Reader(env, tree);
  const top: Record<string, unknown> = {};
  const backendHost: Record<string, unknown> = {};
  const declarations = settingsToParse(options.settings);
  for (const d of declarations) {
    for (const [key, def] of Object.entries(d.top)) top[key] = def.read(r);
    for (const [key, def] of Object.entries(d.backendHost)) backendHost[key] = def.read(r);
  }
  const config = { ...top, backendHost, settings: tree };
  for (const d of declarations) {
    if (options.tool !== true || d.owner === platformSettings.owner) d.check?.(config, r.problems);
  }
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return deepFreeze(config as unknown as Config);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Parses the environment or prints every problem and exits with status 78 (EX_CONFIG). */
export function loadConfigOrExit(env: Env = process.env, options: ParseOptions = {}): Config {
  try {
    return parseConfig(env, options);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
}

export { getSettingArray };
