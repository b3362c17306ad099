/** The gateway's settings: its listener, the resolution cache, request limits, rate limits, API keys. */
import { changeable, type ConfigOf, defineSettings, DEVELOPMENT_API_KEY, setting } from "@svc/config";

export const gatewaySettings = defineSettings({
  owner: "gateway",
  top: {
    gatewayHost: setting.string("GATEWAY_HOST", "0.0.0.0", "gateway listener address"),
    gatewayPort: setting.int("GATEWAY_PORT", 8080, 0, 65_535, "gateway listener port"),
    shutdownDrainDelayMs: setting.int(
      "SHUTDOWN_DRAIN_DELAY_MS",
      5_000,
      0,
      600_000,
      "on SIGTERM, `/ready` answers 503 while the gateway still serves, this long, before the listener closes (below `SHUTDOWN_TIMEOUT_MS`)",
    ),
  },
  backendHost: {
    pluginManifestUrl: setting.string(
      "BackendHost:PluginManifestUrl",
      "/manifests/plugin-ui-assets.manifest.json",
      "path at which the gateway serves the UI-asset manifest (anonymous; 404 until the registry published one)",
      {
        check: (v) =>
          /^\/[A-Za-z0-9._~/-]{1,200}$/.test(v) && !v.includes("..")
            ? null
            : "expected a path such as /manifests/plugin-ui-assets.manifest.json",
      },
    ),
    pluginCallTimeoutMs: setting.int(
      "BackendHost:PluginCallTimeoutMs",
      5_000,
      100,
      120_000,
      "longest a plugin route may take: the request's deadline, after which the caller gets 504",
    ),
    resolveCacheTtlMs: setting.int(
      "BackendHost:ResolveCacheTtlMs",
      5_000,
      0,
      3_600_000,
      "gateway cache of workspace resolutions (0 disables)",
    ),
    resolveStaleMs: setting.int(
      "BackendHost:ResolveStaleMs",
      300_000,
      0,
      86_400_000,
      "how long past its lifetime a cached resolution is served while the resolver is unreachable",
    ),
    resolveCacheSize: setting.int(
      "BackendHost:ResolveCacheSize",
      10_000,
      1,
      10_000_000,
      "cached resolutions per gateway",
    ),
    maxRequestBodyBytes: setting.int(
      "BackendHost:MaxRequestBodyBytes",
      1_048_576,
      1024,
      1024 * 1024 * 1024,
      "request body limit (413 above)",
    ),
    maxMediaUploadBytes: setting.int(
      "BackendHost:MaxMediaUploadBytes",
      10 * 1024 * 1024,
      1,
      1024 * 1024 * 1024,
      "largest file accepted by `POST /api/media` (413 above, and nothing is stored)",
    ),
    maxPackageUploadBytes: setting.int(
      "BackendHost:MaxPackageUploadBytes",
      16 * 1024 * 1024,
      1024,
      1024 * 1024 * 1024,
      "largest plugin package archive accepted by `POST /api/plugins/install` (413 above)",
    ),
    rateLimitAuthPerAccountPerMinute: changeable(
      setting.int(
        "BackendHost:RateLimitAuthPerAccountPerMinute",
        10,
        0,
        1_000_000,
        "sign-in attempts per account (user name, from any address) per minute, exact across replicas (0 disables; changeable at run time)",
      ),
    ),
    rateLimitAuthPerMinute: changeable(
      setting.int(
        "BackendHost:RateLimitAuthPerMinute",
        5,
        0,
        1_000_000,
        "sign-in attempts per client per minute, exact across replicas (0 disables; changeable at run time)",
      ),
    ),
    rateLimitApiPerMinute: changeable(
      setting.int(
        "BackendHost:RateLimitApiPerMinute",
        600,
        0,
        1_000_000_000,
        "operator API requests per client per minute, across replicas (0 disables; changeable at run time)",
      ),
    ),
    maxConnectionsPerClient: setting.int(
      "BackendHost:MaxConnectionsPerClient",
      256,
      0,
      1_000_000,
      "open connections one client address may hold; more are closed as they open (0: no cap; trusted proxies are exempt)",
    ),
    headersTimeoutMs: setting.int(
      "BackendHost:HeadersTimeoutMs",
      10_000,
      1_000,
      600_000,
      "time a connection has to send a request's headers (from its opening, or from the previous answer on a kept-alive connection); then it is closed",
    ),
    idleConnectionTimeoutMs: setting.int(
      "BackendHost:IdleConnectionTimeoutMs",
      75_000,
      1_000,
      3_600_000,
      "a connection with no traffic for this long is closed (above a load balancer's idle timeout)",
    ),
    trustedProxies: setting.list(
      "BackendHost:TrustedProxies",
      "proxies (IP or CIDR) whose `X-Forwarded-For` names the client",
    ),
    enableApiDocs: setting.custom<boolean | null>({
      name: "BackendHost:EnableApiDocs",
      doc: "serve the interactive API reference (Swagger UI) at `/api/docs`",
      defaultText: "`true`, except `false` in `production`",
      secret: false,
      type: "boolean",
      read: (r) =>
        r.optionalString("BackendHost:EnableApiDocs") === null
          ? null
          : r.bool("BackendHost:EnableApiDocs", false),
    }),
    enableBootstrapApiKeys: setting.bool(
      "BackendHost:EnableBootstrapApiKeys",
      false,
      "accept the break-glass `X-Svc-Api-Key` (role `host.api`)",
    ),
    apiKeys: setting.list(
      "BackendHost:ApiKeys",
      "break-glass keys, 16+ characters; the development key is refused unless `development`",
      { secret: true, defaultText: "none (development: the well-known development key)" },
    ),
    bootstrapApiKeysExpireAtUtc: setting.date(
      "BackendHost:BootstrapApiKeysExpireAtUtc",
      "instant after which the break-glass keys stop working",
    ),
  },
  check(config, problems) {
    const c = config as unknown as {
      nodeEnv: string;
      shutdownTimeoutMs: number;
      shutdownDrainDelayMs: number;
      backendHost: { apiKeys: string[] };
    };
    if (c.nodeEnv !== "development" && c.backendHost.apiKeys.includes(DEVELOPMENT_API_KEY)) {
      problems.push(
        "BackendHost__ApiKeys: the well-known development key is refused unless NODE_ENV=development is set explicitly",
      );
    }
    if (c.backendHost.apiKeys.some((key) => key.length < 16)) {
      problems.push("BackendHost__ApiKeys: every key must have at least 16 characters");
    }
    if (c.shutdownDrainDelayMs >= c.shutdownTimeoutMs) {
      problems.push("SHUTDOWN_DRAIN_DELAY_MS: must be below SHUTDOWN_TIMEOUT_MS");
    }
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type GatewayConfig = ConfigOf<typeof gatewaySettings>;
