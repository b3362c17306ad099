import { PLUGIN_CONTRACT_VERSION, type PluginDescriptor } from "@svc/plugin-sdk";
import { describe, expect, it } from "vitest";

import {
  contributedKeys,
  PLUGIN_CONTRACT,
  type RegistryJson,
  RegistryJsonSchema,
  validateRegistry,
} from "./registry.js";

const good = {
  contractVersion: "1.0",
  schemaVersion: "1.0",
  name: "Hello",
  pluginId: "hello",
  version: "1.2.0",
  assemblyFileName: "index.mjs",
  entryTypeName: "HelloPlugin",
  permissions: ["hello.greeting.read", "hello.greeting.update"],
  dependencies: { host: ">=0.1.0", base: "^2.0.0" },
};
const context = { hostVersion: "0.1.0", installed: new Map([["base", "2.3.1"]]) };
const fields = (raw: unknown, ctx = context) => validateRegistry(raw, ctx).map((v) => v.field);

describe("registry.json validation", () => {
  it("accepts a valid descriptor", () => {
    expect(validateRegistry(good, context)).toEqual([]);
  });

  it("lists every broken rule at once", () => {
    const bad = {
      ...good,
      contractVersion: "2.0",
      version: "one",
      dependencies: { host: ">=9.0.0", base: "^3.0.0", missing: "1.x", odd: "not a range" },
      permissions: ["hello.greeting.READ", "other.thing.read", "hello.greeting.fly", "hello.read"],
    };
    expect(fields(bad).sort()).toEqual(
      [
        "/registry.json/contractVersion",
        "/registry.json/version",
        "/registry.json/dependencies/host",
        "/registry.json/dependencies/base",
        "/registry.json/dependencies/missing",
        "/registry.json/dependencies/odd",
        "/registry.json/permissions/0",
        "/registry.json/permissions/0",
        "/registry.json/permissions/1",
        "/registry.json/permissions/2",
        "/registry.json/permissions/3",
      ].sort(),
    );
  });

  it("lists the other rules too when the schema fails: a missing field does not hide a bad version or key", () => {
    const bad: Record<string, unknown> = {
      ...good,
      version: "1.0",
      tier: "kernel",
      permissions: ["Other.greeting.read"],
    };
    delete bad.name;
    const found = fields(bad);
    expect(found).toContain("/registry.json/name");
    expect(found).toContain("/registry.json/tier");
    expect(found).toContain("/registry.json/version");
    expect(found).toContain("/registry.json/permissions/0");
    // Without a valid plugin id, the namespace rules have nothing to hold to: only the schema speaks.
    expect(
      fields({ ...bad, pluginId: "Not An Id" }).filter((f) => f.startsWith("/registry.json/permissions")),
    ).toEqual([]);
  });

  it("refuses a reserved namespace as plugin id, a bad tier and malformed lists", () => {
    expect(fields({ ...good, pluginId: "user", permissions: ["user.thing.read"] })).toContain(
      "/registry.json/pluginId",
    );
    expect(fields({ ...good, tier: "kernel" })).toContain("/registry.json/tier");
    expect(fields({ ...good, sensitiveFields: ["ok", 7] })).toContain("/registry.json/sensitiveFields/1");
    expect(fields({ ...good, extensions: [{ surface: "admin" }] })).toContain(
      "/registry.json/extensions/0/extensionPointId",
    );
    expect(fields({ ...good, pluginId: undefined })).toContain("/registry.json/pluginId");
    expect(fields("a string")).not.toEqual([]);
  });
});

describe("routes and admin-API keys", () => {
  it("holds admin-API keys to the namespace rule but not to the action rule", () => {
    const raw = {
      ...good,
      adminApi: { permissions: ["hello.dashboard.view", "hello.reports", "other.thing.view", "Hello.x"] },
    };
    expect(fields(raw).sort()).toEqual([
      "/registry.json/adminApi/permissions/2",
      "/registry.json/adminApi/permissions/3",
    ]);
    expect(contributedKeys({ ...good, adminApi: { permissions: ["hello.reports"] } })).toEqual([
      "hello.greeting.read",
      "hello.greeting.update",
      "hello.reports",
    ]);
  });

  it("checks routes: a declared key, no host segment, no duplicate", () => {
    const raw = {
      ...good,
      adminApi: { permissions: ["hello.reports"] },
      routes: [
        { method: "GET", path: "/a/:id", handler: "a", permission: "hello.reports" },
        { method: "GET", path: "/a/:other", handler: "b" },
        { method: "POST", path: "/activate", handler: "c" },
        { method: "GET", path: "/x", handler: "d", permission: "hello.undeclared.read" },
      ],
    };
    expect(fields(raw).sort()).toEqual([
      "/registry.json/routes/1",
      "/registry.json/routes/2/path",
      "/registry.json/routes/3/permission",
    ]);
  });
});

/** Every field of the SDK's descriptor; `satisfies` fails to compile when one is missing or extra. */
const descriptorFields = {
  $schema: true,
  contractVersion: true,
  schemaVersion: true,
  name: true,
  pluginId: true,
  version: true,
  assemblyFileName: true,
  entryTypeName: true,
  tier: true,
  capabilities: true,
  requiresCapabilities: true,
  dependencies: true,
  extensions: true,
  sensitiveFields: true,
  permissions: true,
  adminApi: true,
  customFields: true,
  uiAssets: true,
  runtime: true,
  routes: true,
  events: true,
  eventSchemas: true,
} satisfies Record<keyof PluginDescriptor, true>;

describe("events", () => {
  it("accepts only names in the plugin's own namespace: never the platform's or another plugin's", () => {
    expect(validateRegistry({ ...good, events: ["hello.greeted", "hello.farewell.sent"] }, context)).toEqual(
      [],
    );
    const raw = {
      ...good,
      events: ["hello.greeted", "user.created", "plugin.refused", "other.thing", "hello."],
    };
    expect(fields(raw).sort()).toEqual([
      "/registry.json/events/1",
      "/registry.json/events/2",
      "/registry.json/events/3",
      "/registry.json/events/4",
    ]);
  });
});

describe("event schemas", () => {
  const greeted = {
    description: "Someone was greeted",
    schema: {
      type: "object",
      properties: { name: { type: "string" }, at: { type: "string", format: "date-time" } },
      required: ["name"],
      additionalProperties: false,
    },
    example: { name: "Ada", at: "2026-01-05T09:30:00Z" },
  };
  const withSchemas = (eventSchemas: Record<string, unknown>) => ({
    ...good,
    events: ["hello.greeted", "hello.left"],
    eventSchemas,
  });

  it("accepts a declared event's JSON Schema with a matching example, and one without an example", () => {
    expect(
      validateRegistry(withSchemas({ "hello.greeted": greeted, "hello.left": { schema: {} } }), context),
    ).toEqual([]);
  });

  it("refuses an undeclared event, a schema Ajv cannot compile, an example that does not match, and an oversized entry", () => {
    const violations = validateRegistry(
      withSchemas({
        "hello.other": greeted,
        "hello.greeted": { ...greeted, example: { name: 7, extra: true } },
        "hello.left": { schema: { type: "object", properties: { n: { type: "nonsense" } } } },
      }),
      context,
    );
    expect(violations.map((v) => v.field).sort()).toEqual([
      "/registry.json/eventSchemas/hello.greeted/example",
      "/registry.json/eventSchemas/hello.left/schema",
      "/registry.json/eventSchemas/hello.other",
    ]);
    expect(violations.find((v) => v.field.endsWith("/example"))?.message).toContain(
      "does not match the schema",
    );
    const big = { schema: { type: "object", description: "x".repeat(17 * 1024) } };
    expect(fields(withSchemas({ "hello.greeted": big }))).toEqual([
      "/registry.json/eventSchemas/hello.greeted",
    ]);
    const many = Object.fromEntries(
      Array.from({ length: 6 }, (_, i) => [
        `hello.e${i}`,
        { schema: { description: "y".repeat(12 * 1024) } },
      ]),
    );
    expect(fields({ ...good, events: Object.keys(many), eventSchemas: many })).toEqual([
      "/registry.json/eventSchemas",
    ]);
  });

  it("refuses a format Ajv does not know, rather than ignoring it", () => {
    expect(
      fields(withSchemas({ "hello.greeted": { schema: { type: "string", format: "no-such-format" } } })),
    ).toEqual(["/registry.json/eventSchemas/hello.greeted/schema"]);
  });
});

describe("the plugin SDK's PluginDescriptor", () => {
  it("names exactly the fields the validator's schema has", () => {
    expect(Object.keys(RegistryJsonSchema.properties).sort()).toEqual(Object.keys(descriptorFields).sort());
    // At the type level too (a compile error otherwise): what the validator accepts reads as the SDK's
    // descriptor.
    const read = (r: RegistryJson): PluginDescriptor => r;
    const accepted: PluginDescriptor = read(good);
    expect(validateRegistry(accepted, context)).toEqual([]);
  });

  it("the host accepts the SDK's contract version and every one of its major", () => {
    expect(PLUGIN_CONTRACT.current).toBe(PLUGIN_CONTRACT_VERSION);
    expect(fields({ ...good, contractVersion: PLUGIN_CONTRACT_VERSION })).toEqual([]);
    expect(fields({ ...good, contractVersion: "1.9" })).toEqual([]);
    expect(fields({ ...good, contractVersion: "2.0" })).toEqual(["/registry.json/contractVersion"]);
  });
});
