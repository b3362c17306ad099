/**
 * The configuration API through its contracts, with the running services' answers and the stored values
 * in memory: no NATS. A secret's value is never shown, even if a replica sent one; a value is stored only
 * when a running service owns the setting and accepts the value, and the whole change is refused
 * otherwise; with no service answering the API is unavailable (503), never empty.
 */
import { caller, callRoute, configRoutes, type SettingDescription } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import { type CheckReply, type ConfigDeps, definitions, effective, putValues } from "./config.js";

const setting = (variable: string, owner: string, more: Partial<SettingDescription> = {}) => ({
  variable,
  owner,
  type: "string",
  defaultText: "",
  doc: `${variable}'s doc`,
  changeable: true,
  secret: false,
  value: null,
  source: "default" as const,
  ...more,
});

class MemoryConfig implements ConfigDeps {
  replicas: Array<{ settings: SettingDescription[] }> = [];
  checks: CheckReply[] = [];
  readonly values = new Map<string, string>();

  async describe() {
    return this.replicas;
  }
  /** What each check was asked. */
  readonly asked: Array<Readonly<Record<string, string | null>>> = [];
  async check(values: Readonly<Record<string, string | null>>) {
    this.asked.push(values);
    return this.checks;
  }
  async store(values: Readonly<Record<string, string | null>>) {
    for (const [k, v] of Object.entries(values)) {
      if (v === null) this.values.delete(k);
      else this.values.set(k, v);
    }
    return Object.fromEntries(this.values);
  }
}

const operator = caller(["config.read", "config.update"]);

let deps: MemoryConfig;
beforeEach(() => {
  deps = new MemoryConfig();
  deps.replicas = [
    {
      settings: [
        setting("BackendHost__LoginLimit", "gateway", { type: "number", value: "10", source: "environment" }),
        setting("BackendHost__JwtSigningKey", "rbac", { secret: true, value: "leaked-if-shown" }),
      ],
    },
    // A second replica of the gateway describes the same setting: listed once.
    { settings: [setting("BackendHost__LoginLimit", "gateway", { type: "number", value: "10" })] },
  ];
  deps.checks = [
    { owned: ["BackendHost__LoginLimit"], problems: [] },
    { owned: ["BackendHost__WebhookTimeoutMs"], problems: [] },
  ];
});

const call = {
  definitions: () =>
    callRoute(configRoutes["config.definitions"], (req) => definitions(deps, req), {
      principal: operator,
      params: {},
      query: {},
      body: null,
    }),
  effective: () =>
    callRoute(configRoutes["config.effective"], (req) => effective(deps, req), {
      principal: operator,
      params: {},
      query: {},
      body: null,
    }),
  put: (values: Record<string, string | number | boolean | null>) =>
    callRoute(configRoutes["config.put"], (req) => putValues(deps, req), {
      principal: operator,
      params: {},
      query: {},
      body: { values },
    }),
};

describe("the configuration API", () => {
  it("lists each setting once, by owner, and never a secret's value", async () => {
    expect((await call.definitions()).body?.items.map((s) => `${s.owner} ${s.variable}`)).toEqual([
      "gateway BackendHost__LoginLimit",
      "rbac BackendHost__JwtSigningKey",
    ]);
    const values = (await call.effective()).body?.items;
    expect(values).toEqual([
      {
        variable: "BackendHost__LoginLimit",
        owner: "gateway",
        value: "10",
        source: "environment",
        secret: false,
      },
      { variable: "BackendHost__JwtSigningKey", owner: "rbac", value: null, source: "default", secret: true },
    ]);
    expect(JSON.stringify(values)).not.toContain("leaked-if-shown");
  });

  it("stores values a running service owns and accepts, as text; null removes one", async () => {
    expect(
      (await call.put({ BackendHost__LoginLimit: 5, BackendHost__WebhookTimeoutMs: "3000" })).body,
    ).toEqual({
      stored: { BackendHost__LoginLimit: "5", BackendHost__WebhookTimeoutMs: "3000" },
    });
    expect((await call.put({ BackendHost__LoginLimit: null })).body).toEqual({
      stored: { BackendHost__WebhookTimeoutMs: "3000" },
    });
    // The services judged the values as they are stored: as text.
    expect(deps.asked).toEqual([
      { BackendHost__LoginLimit: "5", BackendHost__WebhookTimeoutMs: "3000" },
      { BackendHost__LoginLimit: null },
    ]);
  });

  it("refuses the whole change for a setting no running service owns or a value its owner refuses", async () => {
    deps.checks = [
      {
        owned: ["BackendHost__LoginLimit"],
        problems: [{ variable: "BackendHost__LoginLimit", message: "must be a whole number from 1" }],
      },
    ];
    await expect(call.put({ BackendHost__LoginLimit: 0, BackendHost__Nope: "x" })).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [
        { field: "/body/values/BackendHost__LoginLimit", message: "must be a whole number from 1" },
        { field: "/body/values/BackendHost__Nope", message: "is not a setting of any running service" },
      ],
    });
    expect(deps.values.size).toBe(0);
  });

  it("is unavailable (503) while no service answers, rather than empty", async () => {
    deps.replicas = [];
    deps.checks = [];
    await expect(call.definitions()).rejects.toMatchObject({ code: ErrorCode.ServiceUnavailable });
    await expect(call.effective()).rejects.toMatchObject({ code: ErrorCode.ServiceUnavailable });
    await expect(call.put({ BackendHost__LoginLimit: 5 })).rejects.toMatchObject({
      code: ErrorCode.ServiceUnavailable,
    });
    expect(deps.values.size).toBe(0);
  });
});
