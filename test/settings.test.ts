/**
 * Configuration: the platform's settings and those of the services a process starts, parsed into one
 * frozen object; every bad variable listed at once; the docs generated from the
 * same tables.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import {
  buildSettingTree,
  type Config,
  ConfigError,
  configOf,
  DEVELOPMENT_API_KEY,
  getSetting,
  getSettingArray,
  parseConfig as parseSome,
} from "@svc/config";
import { gatewaySettings } from "@svc/service-gateway";
import { rbacSettings } from "@svc/service-rbac";
import { resolverSettings } from "@svc/service-resolver";
import { webhookSettings } from "@svc/service-webhook-dispatcher";
import { describe, expect, it } from "vitest";

import { ALL_SERVICE_SETTINGS } from "../scripts/lib/service-settings.js";
import { allSettingRows, normaliseTables, settingsDocuments } from "../scripts/lib/settings-doc.js";
import { repoRoot } from "../scripts/lib/stack.js";

describe("settings tree", () => {
  it("maps A__B to A:B, case-insensitively, and __0/__1 to arrays", () => {
    const { tree } = buildSettingTree({
      BackendHost__RateLimitApiPerMinute: "10",
      BackendHost__ApiKeys__1: "second",
      BackendHost__ApiKeys__0: "first",
      BackendHost__ApiKeys__10: "eleventh",
      PATH: "/usr/bin",
    });
    expect(getSetting(tree, "backendhost:ratelimitapiperminute")).toBe("10");
    expect(getSettingArray(tree, "BackendHost:ApiKeys")).toEqual(["first", "second", "eleventh"]);
    expect(getSetting(tree, "PATH")).toBeUndefined();
  });

  it("accepts a comma list where an array is expected", () => {
    const { tree } = buildSettingTree({ BackendHost__ApiKeys: "a, b,,c" });
    expect(getSettingArray(tree, "BackendHost:ApiKeys")).toEqual(["a", "b", "c"]);
  });
});

/** The environment parsed as a process that starts every service parses it. */
const parseConfig = (env: Record<string, string | undefined>) =>
  parseSome(env, { settings: ALL_SERVICE_SETTINGS });

/** The configuration as a process running the gateway, rbac and the resolver reads it (checked). */
const withServices = (config: Config) =>
  configOf(configOf(configOf(config, gatewaySettings), rbacSettings), resolverSettings);

describe("parseConfig", () => {
  it("refuses an empty environment: without NODE_ENV production rules apply, and the built-in keys are refused", () => {
    expect(() => parseConfig({})).toThrow(/BackendHost__JwtSigningKey/);
  });

  it("gives the defaults with NODE_ENV=development and nothing else, frozen", () => {
    const config = withServices(parseConfig({ NODE_ENV: "development" }));
    expect(config.nodeEnv).toBe("development");
    // A job claim's lease is five minutes unless set (the spec's default).
    expect(config.backendHost.jobLeaseMs).toBe(300_000);
    expect(config.gatewayPort).toBe(8080);
    expect(config.natsUrl).toBe("nats://127.0.0.1:4222");
    expect(config.backendHost.rateLimitApiPerMinute).toBe(600);
    expect(config.backendHost.rateLimitAuthPerMinute).toBe(5);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.backendHost)).toBe(true);
  });

  it("reads only the settings of the services given: a gateway process has no dispatcher setting, whatever was imported", () => {
    // This file imports every service; a parse for the gateway still reads the platform's and the gateway's.
    const gateway = parseSome({ NODE_ENV: "development" }, { settings: [gatewaySettings] });
    expect(configOf(gateway, gatewaySettings).backendHost.resolveCacheTtlMs).toBeGreaterThan(0);
    expect("webhookTimeoutMs" in gateway.backendHost).toBe(false);
    expect("secretsEncryptionKey" in gateway.backendHost).toBe(false);
    expect(() => configOf(gateway, webhookSettings)).toThrow(/lacks webhook-dispatcher's settings/);
    // A dispatcher's setting in a gateway's environment is not the gateway's to check.
    expect(() =>
      parseSome(
        { NODE_ENV: "development", BackendHost__WebhookTimeoutMs: "soon" },
        { settings: [gatewaySettings] },
      ),
    ).not.toThrow();
    expect(() =>
      parseSome(
        { NODE_ENV: "development", BackendHost__WebhookTimeoutMs: "soon" },
        { settings: [webhookSettings] },
      ),
    ).toThrow(/BackendHost__WebhookTimeoutMs/);
  });

  it("reads spec-form settings and plain variables", () => {
    const config = withServices(
      parseConfig({
        GATEWAY_PORT: "9090",
        NODE_ENV: "production",
        BackendHost__JwtSigningKey:
          "-----BEGIN PRIVATE KEY-----\\nnot-parsed-here\\n-----END PRIVATE KEY-----",
        BackendHost__SecretsEncryptionKey: Buffer.alloc(32, 7).toString("base64"),
        BackendHost__RateLimitApiPerMinute: "0",
        backendhost__defaulttenantkey: "acme",
      }),
    );
    expect(config.gatewayPort).toBe(9090);
    expect(config.nodeEnv).toBe("production");
    expect(config.backendHost.rateLimitApiPerMinute).toBe(0);
    expect(config.backendHost.defaultTenantKey).toBe("acme");
  });

  it("lists every bad variable at once", () => {
    let error: unknown;
    try {
      parseConfig({
        NODE_ENV: "development",
        GATEWAY_PORT: "http",
        NATS_URL: "redis://x",
        BackendHost__RequestTimeoutMs: "1.5",
        LOG_LEVEL: "loud",
        SVC_SUBJECT_PREFIX: "a.b",
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join("\n");
    for (const name of [
      "GATEWAY_PORT",
      "NATS_URL",
      "BackendHost__RequestTimeoutMs",
      "LOG_LEVEL",
      "SVC_SUBJECT_PREFIX",
    ]) {
      expect(problems).toContain(name);
    }
    expect((error as ConfigError).problems).toHaveLength(5);
  });

  it("reads any setting from the file <VARIABLE>_FILE names, as a mounted Secret gives it", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-settings-files-"));
    try {
      writeFileSync(join(dir, "database-url"), "postgres://svc@db.internal:5432/svc\n");
      const key = Buffer.alloc(32, 9).toString("base64");
      writeFileSync(join(dir, "secrets-key"), key);
      const config = withServices(
        parseConfig({
          NODE_ENV: "development",
          DATABASE_URL_FILE: join(dir, "database-url"),
          BackendHost__SecretsEncryptionKey_FILE: join(dir, "secrets-key"),
        }),
      );
      expect(config.databaseUrl).toBe("postgres://svc@db.internal:5432/svc");
      expect((config.backendHost as unknown as { secretsEncryptionKey: string }).secretsEncryptionKey).toBe(
        key,
      );
      // A missing file, or both forms at once, is a bad configuration naming the variable.
      expect(() => parseConfig({ DATABASE_URL_FILE: join(dir, "nothing-here") })).toThrow(
        /DATABASE_URL_FILE: cannot read .*nothing-here \(ENOENT\)/,
      );
      expect(() =>
        parseConfig({ DATABASE_URL: "postgres://a@b/c", DATABASE_URL_FILE: join(dir, "database-url") }),
      ).toThrow(/set either DATABASE_URL or DATABASE_URL_FILE/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses the development signing key and API key in every mode but development", () => {
    expect(() => parseConfig({ NODE_ENV: "production" })).toThrow(/JwtSigningKey/);
    expect(() => parseConfig({ NODE_ENV: "test" })).toThrow(/JwtSigningKey/);
    expect(() => parseConfig({ NODE_ENV: "test" })).toThrow(/SecretsEncryptionKey/);
    expect(() =>
      parseConfig({
        NODE_ENV: "test",
        BackendHost__JwtSigningKey: "pem",
        BackendHost__SecretsEncryptionKey: Buffer.alloc(32, 7).toString("base64"),
        BackendHost__ApiKeys__0: DEVELOPMENT_API_KEY,
      }),
    ).toThrow(/well-known development key/);
    expect(() =>
      parseConfig({
        NODE_ENV: "production",
        BackendHost__JwtSigningKey: "pem",
        BackendHost__SecretsEncryptionKey: Buffer.alloc(32, 7).toString("base64"),
        BackendHost__ApiKeys__0: DEVELOPMENT_API_KEY,
      }),
    ).toThrow(/well-known development key/);
    expect(withServices(parseConfig({ NODE_ENV: "development" })).backendHost.jwtSigningKeyIsDefault).toBe(
      true,
    );
  });

  it("allows a password hash cost below 15 only in development and test, and never outside 10..17", () => {
    const keys = {
      BackendHost__JwtSigningKey: "pem",
      BackendHost__SecretsEncryptionKey: Buffer.alloc(32, 7).toString("base64"),
    };
    const cost = (env: Record<string, string>) =>
      withServices(parseConfig({ ...keys, ...env })).backendHost.passwordHashCost;
    expect(cost({ NODE_ENV: "production" })).toBe(15);
    expect(cost({ NODE_ENV: "production", BackendHost__PasswordHashCost: "17" })).toBe(17);
    expect(cost({ NODE_ENV: "test", BackendHost__PasswordHashCost: "10" })).toBe(10);
    expect(cost({ NODE_ENV: "development", BackendHost__PasswordHashCost: "12" })).toBe(12);
    expect(() => cost({ NODE_ENV: "production", BackendHost__PasswordHashCost: "14" })).toThrow(
      /PasswordHashCost: 14 is below 15, allowed only when NODE_ENV is development or test/,
    );
    expect(() => cost({ NODE_ENV: "test", BackendHost__PasswordHashCost: "9" })).toThrow(/PasswordHashCost/);
    expect(() => cost({ NODE_ENV: "test", BackendHost__PasswordHashCost: "18" })).toThrow(/PasswordHashCost/);
  });

  it("reads roles and API keys in the spec's array form", () => {
    const config = withServices(
      parseConfig({
        NODE_ENV: "development",
        BackendHost__RbacRoles__0__Name: "auditor",
        BackendHost__RbacRoles__0__Permissions__0: "job.read",
        BackendHost__RbacRoles__0__Permissions__1: "webhook.read",
        BackendHost__ApiKeys__0: "a-long-enough-api-key-1",
        BackendHost__EnableBootstrapApiKeys: "true",
        BackendHost__BootstrapApiKeysExpireAtUtc: "2030-01-01T00:00:00Z",
      }),
    );
    expect(config.backendHost.rbacRoles).toEqual([
      { name: "auditor", permissions: ["job.read", "webhook.read"] },
    ]);
    expect(config.backendHost.apiKeys).toEqual(["a-long-enough-api-key-1"]);
    expect(config.backendHost.enableBootstrapApiKeys).toBe(true);
    expect(config.backendHost.bootstrapApiKeysExpireAtUtc?.toISOString()).toBe("2030-01-01T00:00:00.000Z");
  });

  it("never echoes a secret-looking value in an error", () => {
    expect(() =>
      parseConfig({ BackendHost__SigningKey: "x", BackendHost__RequestTimeoutMs: "soon" }),
    ).toThrow(/RequestTimeoutMs/);
    try {
      parseConfig({ DATABASE_URL: "not a url with password hunter2" });
    } catch (e) {
      expect((e as Error).message).toContain("DATABASE_URL");
    }
  });
});

describe("settings declarations", () => {
  it("declares each variable once, with a meaning, and marks the secrets", () => {
    const rows = allSettingRows();
    expect(new Set(rows.map((r) => r.variable)).size).toBe(rows.length);
    for (const row of rows) expect(row.doc.length, row.variable).toBeGreaterThan(10);
    const secrets = rows.filter((r) => r.secret).map((r) => r.variable);
    expect(secrets).toEqual(
      expect.arrayContaining([
        "DATABASE_URL",
        "BackendHost__ApiKeys__N",
        "BackendHost__JwtSigningKey",
        "BackendHost__SecretsEncryptionKey",
      ]),
    );
    expect(new Set(rows.map((r) => r.owner))).toEqual(
      new Set([
        "platform",
        "gateway",
        "rbac",
        "resolver",
        "webhook-dispatcher",
        "job-reaper",
        "plugin-registry",
      ]),
    );
  });

  it("keeps the README's and the operator guide's tables as the declarations generate them", () => {
    for (const { file, content } of settingsDocuments()) {
      const text = readFileSync(join(repoRoot, file), "utf8");
      expect(normaliseTables(text), `${file}: run make settings-doc`).toBe(normaliseTables(content(text)));
    }
  });
});
