import { buildSettingTree, getSetting, getSettingArray, type SettingTree } from "./settings-tree.js";

export const NodeEnv = { Development: "development", Test: "test", Production: "production" } as const;
export type NodeEnv = (typeof NodeEnv)[keyof typeof NodeEnv];

export const LogLevel = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LogLevel)[number];

/** Product settings, read from `BackendHost__*` environment variables (spec form). */
export interface BackendHostSettings {
  /** Deadline of a gateway → service request over NATS, in ms. */
  readonly requestTimeoutMs: number;
  /** When set, only workspaces of this tenant are visible (spec 2.1.2). */
  readonly defaultTenantKey: string | null;
  /** Base of problem-document `type` URLs (spec 2.5 `{problems_base_url}`). */
  readonly problemsBaseUrl: string;
  /** How long the gateway may serve a cached workspace resolution, in ms (0 disables the cache). */
  readonly resolveCacheTtlMs: number;
  /**
   * How long past its lifetime the gateway may still serve a cached resolution while the resolver cannot
   * be reached (NATS down, no replica), in ms (0: never serve a stale one).
   */
  readonly resolveStaleMs: number;
  /** How many host/path resolutions the gateway keeps cached. */
  readonly resolveCacheSize: number;
  /** Largest accepted HTTP request body, in bytes. */
  readonly maxRequestBodyBytes: number;
  readonly rateLimitAuthPerMinute: number;
  readonly rateLimitApiPerMinute: number;
  /** Lease a job claim grants (spec 3.1: five minutes), ms. */
  readonly jobLeaseMs: number;
  /** How often the reaper sweeps expired leases, ms. */
  readonly jobReaperIntervalMs: number;
  /** Backstop poll of workers for due jobs (scheduled, retried), ms. */
  readonly jobPollIntervalMs: number;
  /** PKCS#8 PEM of the ES256 token-signing key; the built-in development key when unset (refused outside development). */
  readonly jwtSigningKey: string;
  /** True when jwtSigningKey is the well-known development key. */
  readonly jwtSigningKeyIsDefault: boolean;
  readonly jwtIssuer: string;
  readonly accessTokenLifetimeSeconds: number;
  readonly enableBootstrapApiKeys: boolean;
  /** Break-glass API keys (header X-Svc-Api-Key). */
  readonly apiKeys: readonly string[];
  /** After this instant the bootstrap API keys stop working; null: no expiry. */
  readonly bootstrapApiKeysExpireAtUtc: Date | null;
  /** Peers (IPs or CIDRs) whose X-Forwarded-For is believed for rate limiting. */
  readonly trustedProxies: readonly string[];
  /** Extra roles: name → permission keys (BackendHost__RbacRoles__N__Name / __Permissions__M). */
  readonly rbacRoles: ReadonlyArray<{ readonly name: string; readonly permissions: readonly string[] }>;
  /** 32 bytes (base64) that encrypt stored secrets (webhook secrets); a development default when unset. */
  readonly secretsEncryptionKey: string;
  readonly secretsEncryptionKeyIsDefault: boolean;
  /** Networks (CIDR) webhook targets may resolve to although private/loopback (development, tests). */
  readonly webhookAllowedNetworks: readonly string[];
  readonly webhookTimeoutMs: number;
  readonly webhookMaxResponseBytes: number;
  /** Consecutive failures of one receiver that open its circuit. */
  readonly webhookCircuitFailureThreshold: number;
  /** How long an open circuit stays open before a trial delivery, ms. */
  readonly webhookCircuitOpenMs: number;
}

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

export interface Config {
  readonly nodeEnv: NodeEnv;
  readonly logLevel: LogLevel;
  readonly natsUrl: string;
  readonly databaseUrl: string;
  readonly databasePoolSize: number;
  readonly gatewayHost: string;
  readonly gatewayPort: number;
  /** First token of every NATS subject (`svc`); tests use their own so runs never collide. */
  readonly subjectPrefix: string;
  /** Name of the JetStream stream that holds `<prefix>.events.>`. */
  readonly eventsStream: string;
  /** How long a service may take to drain on SIGTERM before it is forced to exit, in ms. */
  readonly shutdownTimeoutMs: number;
  /**
   * On SIGTERM the gateway reports not ready and keeps serving this long before it closes its listener,
   * so that load balancers stop sending first (ms; keep it below SHUTDOWN_TIMEOUT_MS).
   */
  readonly shutdownDrainDelayMs: number;
  readonly backendHost: BackendHostSettings;
  /** Every `X__Y` variable as a case-insensitive tree, for settings read by later features. */
  readonly settings: SettingTree;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/** The defaults, in one place. */
export const defaults = {
  nodeEnv: NodeEnv.Development,
  logLevel: "info",
  natsUrl: "nats://127.0.0.1:4222",
  databaseUrl: "postgres://postgres@127.0.0.1:5432/svc",
  databasePoolSize: 10,
  gatewayHost: "0.0.0.0",
  gatewayPort: 8080,
  subjectPrefix: "svc",
  eventsStream: "SVC_EVENTS",
  shutdownTimeoutMs: 10_000,
  shutdownDrainDelayMs: 5_000,
  backendHost: {
    requestTimeoutMs: 5_000,
    defaultTenantKey: null,
    problemsBaseUrl: "/problems",
    resolveCacheTtlMs: 5_000,
    resolveStaleMs: 300_000,
    resolveCacheSize: 10_000,
    maxRequestBodyBytes: 1_048_576,
    rateLimitAuthPerMinute: 5,
    rateLimitApiPerMinute: 600,
    jobLeaseMs: 300_000,
    jobReaperIntervalMs: 10_000,
    jobPollIntervalMs: 2_000,
    jwtSigningKey: DEVELOPMENT_JWT_SIGNING_KEY,
    jwtSigningKeyIsDefault: true,
    jwtIssuer: "svc",
    accessTokenLifetimeSeconds: 3_600,
    enableBootstrapApiKeys: false,
    apiKeys: [],
    bootstrapApiKeysExpireAtUtc: null,
    trustedProxies: [],
    rbacRoles: [],
    secretsEncryptionKey: DEVELOPMENT_SECRETS_KEY,
    secretsEncryptionKeyIsDefault: true,
    webhookAllowedNetworks: [],
    webhookTimeoutMs: 10_000,
    webhookMaxResponseBytes: 65_536,
    webhookCircuitFailureThreshold: 5,
    webhookCircuitOpenMs: 30_000,
  },
} as const satisfies Omit<Config, "settings">;

type Env = Readonly<Record<string, string | undefined>>;

/** Collects every problem instead of stopping at the first, so one run lists all bad variables. */
class Reader {
  readonly problems: string[] = [];
  constructor(
    private readonly env: Env,
    private readonly tree: SettingTree,
  ) {}

  private raw(name: string): { label: string; value: string } | undefined {
    if (name.includes(":")) {
      const value = getSetting(this.tree, name);
      if (value === undefined) return undefined;
      const label = name.replaceAll(":", "__");
      if (typeof value !== "string") {
        this.problems.push(`${label}: expected a single value`);
        return undefined;
      }
      return { label, value };
    }
    const value = this.env[name];
    return value === undefined || value === "" ? undefined : { label: name, value };
  }

  string(name: string, fallback: string, check?: (v: string) => string | null): string {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const problem = check?.(raw.value) ?? null;
    if (problem !== null) {
      this.problems.push(`${raw.label}: ${problem} (got ${JSON.stringify(redact(raw.label, raw.value))})`);
      return fallback;
    }
    return raw.value;
  }

  optionalString(name: string): string | null {
    const raw = this.raw(name);
    return raw === undefined || raw.value.trim() === "" ? null : raw.value.trim();
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = Number(raw.value);
    if (!/^-?\d+$/.test(raw.value.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      this.problems.push(
        `${raw.label}: expected an integer from ${min} to ${max} (got ${JSON.stringify(raw.value)})`,
      );
      return fallback;
    }
    return value;
  }

  oneOf<T extends string>(name: string, fallback: T, allowed: readonly T[]): T {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = raw.value.trim().toLowerCase() as T;
    if (!allowed.includes(value)) {
      this.problems.push(
        `${raw.label}: expected one of ${allowed.join(", ")} (got ${JSON.stringify(raw.value)})`,
      );
      return fallback;
    }
    return value;
  }

  array(name: string): string[] {
    return getSettingArray(this.tree, name) ?? [];
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const v = raw.value.trim().toLowerCase();
    if (v === "true" || v === "1") return true;
    if (v === "false" || v === "0") return false;
    this.problems.push(`${raw.label}: expected true or false (got ${JSON.stringify(raw.value)})`);
    return fallback;
  }

  date(name: string): Date | null {
    const raw = this.raw(name);
    if (raw === undefined) return null;
    const d = new Date(raw.value);
    if (Number.isNaN(d.getTime())) {
      this.problems.push(`${raw.label}: expected an ISO 8601 date-time (got ${JSON.stringify(raw.value)})`);
      return null;
    }
    return d;
  }

  /** `Name` + `Permissions` objects under an array setting. */
  roles(name: string): Array<{ name: string; permissions: string[] }> {
    const node = getSetting(this.tree, name);
    if (node === undefined) return [];
    if (typeof node !== "object" || Array.isArray(node)) {
      this.problems.push(`${name.replaceAll(":", "__")}: expected __N__Name and __N__Permissions__M entries`);
      return [];
    }
    const roles: Array<{ name: string; permissions: string[] }> = [];
    for (const [index, entry] of Object.entries(node)) {
      const label = `${name.replaceAll(":", "__")}__${index}`;
      const roleName = typeof entry === "object" && !Array.isArray(entry) ? entry.name : undefined;
      if (typeof roleName !== "string" || !/^[a-z][a-z0-9._-]{0,62}$/.test(roleName)) {
        this.problems.push(`${label}__Name: expected a role name (lower case letters, digits, . _ -)`);
        continue;
      }
      roles.push({
        name: roleName,
        permissions: getSettingArray(this.tree, `${name}:${index}:permissions`) ?? [],
      });
    }
    return roles;
  }
}

const SECRET_NAME = /key|secret|password|token/i;
function redact(label: string, value: string): string {
  return SECRET_NAME.test(label) ? "<redacted>" : value;
}

function urlCheck(protocols: readonly string[]) {
  return (value: string): string | null => {
    try {
      const url = new URL(value);
      return protocols.includes(url.protocol) ? null : `expected a ${protocols.join(" or ")} URL`;
    } catch {
      return "expected an absolute URL";
    }
  };
}

const SUBJECT_TOKEN = /^[A-Za-z0-9_-]+$/;

/**
 * Parses the environment once into a typed, frozen configuration. Throws ConfigError listing every bad
 * variable; the service entry points print it and exit non-zero.
 */
export function parseConfig(env: Env = process.env): Config {
  const { tree } = buildSettingTree(env);
  const r = new Reader(env, tree);
  const d = defaults;
  const config: Config = {
    nodeEnv: r.oneOf("NODE_ENV", d.nodeEnv, Object.values(NodeEnv)),
    logLevel: r.oneOf("LOG_LEVEL", d.logLevel, LogLevel),
    natsUrl: r.string("NATS_URL", d.natsUrl, (v) =>
      v.split(",").every((u) => urlCheck(["nats:", "tls:", "ws:", "wss:"])(u.trim()) === null)
        ? null
        : "expected nats:// URL(s), comma-separated",
    ),
    databaseUrl: r.string("DATABASE_URL", d.databaseUrl, urlCheck(["postgres:", "postgresql:"])),
    databasePoolSize: r.int("DATABASE_POOL_SIZE", d.databasePoolSize, 1, 500),
    gatewayHost: r.string("GATEWAY_HOST", d.gatewayHost),
    gatewayPort: r.int("GATEWAY_PORT", d.gatewayPort, 0, 65_535),
    subjectPrefix: r.string("SVC_SUBJECT_PREFIX", d.subjectPrefix, (v) =>
      SUBJECT_TOKEN.test(v) ? null : "expected one subject token (letters, digits, _ and -)",
    ),
    eventsStream: r.string("SVC_EVENTS_STREAM", d.eventsStream, (v) =>
      SUBJECT_TOKEN.test(v) ? null : "expected a stream name (letters, digits, _ and -)",
    ),
    shutdownTimeoutMs: r.int("SHUTDOWN_TIMEOUT_MS", d.shutdownTimeoutMs, 100, 600_000),
    shutdownDrainDelayMs: r.int("SHUTDOWN_DRAIN_DELAY_MS", d.shutdownDrainDelayMs, 0, 600_000),
    backendHost: {
      requestTimeoutMs: r.int("BackendHost:RequestTimeoutMs", d.backendHost.requestTimeoutMs, 10, 600_000),
      defaultTenantKey: r.optionalString("BackendHost:DefaultTenantKey"),
      problemsBaseUrl: r.string("BackendHost:ProblemsBaseUrl", d.backendHost.problemsBaseUrl),
      resolveCacheTtlMs: r.int(
        "BackendHost:ResolveCacheTtlMs",
        d.backendHost.resolveCacheTtlMs,
        0,
        3_600_000,
      ),
      resolveStaleMs: r.int("BackendHost:ResolveStaleMs", d.backendHost.resolveStaleMs, 0, 86_400_000),
      resolveCacheSize: r.int("BackendHost:ResolveCacheSize", d.backendHost.resolveCacheSize, 1, 10_000_000),
      maxRequestBodyBytes: r.int(
        "BackendHost:MaxRequestBodyBytes",
        d.backendHost.maxRequestBodyBytes,
        1024,
        1024 * 1024 * 1024,
      ),
      rateLimitAuthPerMinute: r.int(
        "BackendHost:RateLimitAuthPerMinute",
        d.backendHost.rateLimitAuthPerMinute,
        0,
        1_000_000,
      ),
      rateLimitApiPerMinute: r.int(
        "BackendHost:RateLimitApiPerMinute",
        d.backendHost.rateLimitApiPerMinute,
        0,
        1_000_000_000,
      ),
      jobLeaseMs: r.int("BackendHost:JobLeaseMs", d.backendHost.jobLeaseMs, 100, 86_400_000),
      jobReaperIntervalMs: r.int(
        "BackendHost:JobReaperIntervalMs",
        d.backendHost.jobReaperIntervalMs,
        50,
        3_600_000,
      ),
      jobPollIntervalMs: r.int(
        "BackendHost:JobPollIntervalMs",
        d.backendHost.jobPollIntervalMs,
        50,
        3_600_000,
      ),
      jwtSigningKey:
        r.optionalString("BackendHost:JwtSigningKey")?.replaceAll("\\n", "\n") ?? DEVELOPMENT_JWT_SIGNING_KEY,
      jwtSigningKeyIsDefault: r.optionalString("BackendHost:JwtSigningKey") === null,
      jwtIssuer: r.string("BackendHost:JwtIssuer", d.backendHost.jwtIssuer),
      accessTokenLifetimeSeconds: r.int(
        "BackendHost:AccessTokenLifetimeSeconds",
        d.backendHost.accessTokenLifetimeSeconds,
        30,
        7 * 86_400,
      ),
      enableBootstrapApiKeys: r.bool(
        "BackendHost:EnableBootstrapApiKeys",
        d.backendHost.enableBootstrapApiKeys,
      ),
      apiKeys: r.array("BackendHost:ApiKeys"),
      bootstrapApiKeysExpireAtUtc: r.date("BackendHost:BootstrapApiKeysExpireAtUtc"),
      trustedProxies: r.array("BackendHost:TrustedProxies"),
      rbacRoles: r.roles("BackendHost:RbacRoles"),
      secretsEncryptionKey: r.string("BackendHost:SecretsEncryptionKey", DEVELOPMENT_SECRETS_KEY, (v) =>
        Buffer.from(v, "base64").length === 32 ? null : "expected 32 bytes, base64-encoded",
      ),
      secretsEncryptionKeyIsDefault: r.optionalString("BackendHost:SecretsEncryptionKey") === null,
      webhookAllowedNetworks: r.array("BackendHost:WebhookAllowedNetworks"),
      webhookTimeoutMs: r.int("BackendHost:WebhookTimeoutMs", d.backendHost.webhookTimeoutMs, 100, 120_000),
      webhookMaxResponseBytes: r.int(
        "BackendHost:WebhookMaxResponseBytes",
        d.backendHost.webhookMaxResponseBytes,
        0,
        10_485_760,
      ),
      webhookCircuitFailureThreshold: r.int(
        "BackendHost:WebhookCircuitFailureThreshold",
        d.backendHost.webhookCircuitFailureThreshold,
        1,
        1_000,
      ),
      webhookCircuitOpenMs: r.int(
        "BackendHost:WebhookCircuitOpenMs",
        d.backendHost.webhookCircuitOpenMs,
        100,
        3_600_000,
      ),
    },
    settings: tree,
  };
  if (config.nodeEnv !== NodeEnv.Development) {
    // Spec 5.1: the built-in signing key and the well-known keys are for development only; tests and
    // production bring their own.
    if (config.backendHost.jwtSigningKeyIsDefault) {
      r.problems.push(
        `BackendHost__JwtSigningKey: must be set when NODE_ENV is ${config.nodeEnv} (the built-in development key is refused outside development)`,
      );
    }
    if (config.backendHost.secretsEncryptionKeyIsDefault) {
      r.problems.push(
        `BackendHost__SecretsEncryptionKey: must be set when NODE_ENV is ${config.nodeEnv} (32 random bytes, base64)`,
      );
    }
    if (config.backendHost.apiKeys.includes(DEVELOPMENT_API_KEY)) {
      r.problems.push("BackendHost__ApiKeys: the well-known development key is refused outside development");
    }
  }
  if (config.shutdownDrainDelayMs >= config.shutdownTimeoutMs) {
    r.problems.push("SHUTDOWN_DRAIN_DELAY_MS: must be below SHUTDOWN_TIMEOUT_MS");
  }
  for (const key of config.backendHost.apiKeys) {
    if (key.length < 16) r.problems.push("BackendHost__ApiKeys: every key must have at least 16 characters");
  }
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

let cached: Config | undefined;

/** The process's configuration, parsed on first use. */
export function getConfig(): Config {
  cached ??= parseConfig(process.env);
  return cached;
}

/** Forgets the cached configuration (tests). */
export function resetConfigCache(): void {
  cached = undefined;
}

/** Parses the environment or prints every problem and exits with status 78 (EX_CONFIG). */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    cached = parseConfig(env);
    return cached;
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
}

export { getSettingArray };
