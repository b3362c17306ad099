/**
 * `registry.json`, the plugin descriptor, and its validation at install:
 * the schema (published as JSON Schema for editors, checked here with the same schema), then the rules
 * a schema cannot say: the plugin contract version the host supports, the host version a plugin needs
 * (`dependencies.host`), other plugins it needs (semver ranges), declared permission keys inside the
 * plugin's namespace. Every violation is listed.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
import { CORE_PERMISSION_KEYS } from "@svc/access/permissions";
import { PLUGIN_CONTRACT_VERSION } from "@svc/plugin-sdk";
import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import semver from "semver";

/**
 * The plugin contract this host implements (the plugin SDK's), and the contract versions it accepts: every
 * version of the same major.
 */
const CONTRACT_MAJOR = semver.major(semver.coerce(PLUGIN_CONTRACT_VERSION) ?? "0.0.0");
export const PLUGIN_CONTRACT = {
  current: PLUGIN_CONTRACT_VERSION,
  supported: `>=${CONTRACT_MAJOR}.0.0 <${CONTRACT_MAJOR + 1}.0.0`,
} as const;

/** The key of `dependencies` that names the host, e.g. `"dependencies": { "host": ">=0.1.0" }`. */
export const HOST_DEPENDENCY = "host";

/** The property of registry.json that lists the permission keys a plugin declares. */
export const PERMISSIONS_PROPERTY = "permissions";

export const PLUGIN_ID_PATTERN = "^[a-z][a-z0-9-]{1,62}$";
const KEY_ACTIONS = ["create", "read", "update", "delete", "execute"] as const;

/** Namespaces a plugin id may not take: the host's own key namespaces and a few more. */
export const RESERVED_NAMESPACES: ReadonlySet<string> = new Set([
  ...CORE_PERMISSION_KEYS.map((k) => k.split(".")[0] as string),
  "svc",
  "host",
  "system",
  "rbac",
  "security",
  "admin",
  // Segments of the plugin API itself (/api/plugins/installed, /audit, …): a plugin id there would hide it.
  "install",
  "installed",
  "audit",
  "signature-report",
  "contracts",
]);

/** The HTTP methods a plugin route may declare. */
export const ROUTE_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
/** First path segments a plugin route may not take: the host's own routes under /api/plugins/{id}/. */
export const RESERVED_ROUTE_SEGMENTS: ReadonlySet<string> = new Set(["activate", "deactivate", "update"]);

/** A file of the package's `ui/` directory, for the admin or the workspace surface. */
const UiAsset = Type.Object(
  {
    surface: Type.Union([Type.Literal("admin"), Type.Literal("workspace")]),
    path: Type.String({ pattern: "^ui(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$", maxLength: 300 }),
  },
  { additionalProperties: false },
);

const Identifier = Type.String({ minLength: 1, maxLength: 100, pattern: "^[A-Za-z_][A-Za-z0-9_.-]*$" });

export const RegistryJsonSchema = Type.Object(
  {
    $schema: Type.Optional(Type.String()),
    contractVersion: Type.String({ minLength: 1, maxLength: 20, description: "plugin-contract version" }),
    schemaVersion: Type.String({ minLength: 1, maxLength: 20, description: "version of this descriptor" }),
    name: Type.String({ minLength: 1, maxLength: 200 }),
    pluginId: Type.String({ pattern: PLUGIN_ID_PATTERN, description: "stable id, lower case" }),
    version: Type.String({ minLength: 1, maxLength: 64, description: "semantic version" }),
    assemblyFileName: Type.String({
      minLength: 1,
      maxLength: 300,
      description: "path of the entry ES module inside the package",
    }),
    entryTypeName: Type.String({
      minLength: 1,
      maxLength: 200,
      description: "the entry module's export name",
    }),
    tier: Type.Optional(
      Type.Union([Type.Literal("system"), Type.Literal("application")], { default: "application" }),
    ),
    capabilities: Type.Optional(Type.Array(Identifier, { maxItems: 100, uniqueItems: true })),
    requiresCapabilities: Type.Optional(Type.Array(Identifier, { maxItems: 100, uniqueItems: true })),
    dependencies: Type.Optional(
      Type.Record(
        Type.String({ pattern: `^(${HOST_DEPENDENCY}|[a-z][a-z0-9-]{1,62})$` }),
        Type.String({ maxLength: 100 }),
        {
          description: `other plugins by semver range; the key "${HOST_DEPENDENCY}" is the host`,
        },
      ),
    ),
    extensions: Type.Optional(
      Type.Array(
        Type.Object({
          extensionPointId: Type.String({ minLength: 1, maxLength: 200 }),
          surface: Type.String({ minLength: 1, maxLength: 50 }),
        }),
        { maxItems: 200 },
      ),
    ),
    sensitiveFields: Type.Optional(Type.Array(Identifier, { maxItems: 200, uniqueItems: true })),
    [PERMISSIONS_PROPERTY]: Type.Optional(
      Type.Array(Type.String({ maxLength: 200 }), {
        maxItems: 200,
        uniqueItems: true,
        description:
          "permission keys the plugin declares: <pluginId>.<resource>.<create|read|update|delete|execute>",
      }),
    ),
    adminApi: Type.Optional(
      Type.Object(
        {
          permissions: Type.Optional(
            Type.Array(Type.String({ maxLength: 200 }), {
              maxItems: 200,
              uniqueItems: true,
              description:
                "keys the plugin's admin-API extension contributes: inside the plugin's namespace, any last segment",
            }),
          ),
        },
        { additionalProperties: true },
      ),
    ),
    customFields: Type.Optional(
      Type.Array(
        Type.Object(
          {
            entityName: Type.String({
              pattern: "^(user|workspace|tenant|[a-z][a-z0-9-]{1,62}\\.[a-z][a-z0-9-]{0,62})$",
              description: "user, workspace, tenant, or an entity of the plugin's own (`<pluginId>.<name>`)",
            }),
            key: Type.String({ pattern: "^[A-Za-z0-9_.-]{1,100}$" }),
            label: Type.Optional(Type.String({ maxLength: 200 })),
            type: Type.Optional(
              Type.Union(
                (["text", "number", "boolean", "select", "url", "color", "date", "email"] as const).map((t) =>
                  Type.Literal(t),
                ),
              ),
            ),
            required: Type.Optional(Type.Boolean()),
            options: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 100 })),
            description: Type.Optional(Type.String({ maxLength: 1_000 })),
          },
          { additionalProperties: false },
        ),
        { maxItems: 200, description: "custom fields the plugin defines on platform or its own entities" },
      ),
    ),
    uiAssets: Type.Optional(
      Type.Object(
        {
          entries: Type.Optional(
            Type.Array(UiAsset, { maxItems: 20, description: "entry scripts (ES modules)" }),
          ),
          styles: Type.Optional(Type.Array(UiAsset, { maxItems: 20, description: "style sheets" })),
        },
        {
          additionalProperties: false,
          description:
            "scripts and styles (under ui/) that plugin-ui-assets.manifest.json lists while the plugin is active",
        },
      ),
    ),
    runtime: Type.Optional(
      Type.Union([Type.Literal("worker"), Type.Literal("external")], {
        default: "worker",
        description:
          "`worker`: the host runs the entry module; `external`: the plugin serves its subject with its own NATS client",
      }),
    ),
    routes: Type.Optional(
      Type.Array(
        Type.Object(
          {
            method: Type.Union(ROUTE_METHODS.map((m) => Type.Literal(m))),
            path: Type.String({
              pattern: "^/[A-Za-z0-9._~:-]*(/[A-Za-z0-9._~:-]+)*$",
              maxLength: 200,
              description: "path under /api/plugins/{pluginId}; `:name` segments are parameters",
            }),
            permission: Type.Optional(
              Type.String({
                maxLength: 200,
                description: "key the caller must hold (or `*`); empty or absent: any authenticated caller",
              }),
            ),
            handler: Type.String({
              pattern: "^[A-Za-z_$][A-Za-z0-9_$]{0,99}$",
              description: "name of the entry object's method that answers the route",
            }),
          },
          { additionalProperties: false },
        ),
        { maxItems: 100, description: "HTTP routes the plugin serves" },
      ),
    ),
    events: Type.Optional(
      Type.Array(Type.String({ pattern: "^[\\w.-]{1,120}$" }), {
        maxItems: 200,
        uniqueItems: true,
        description: "event names the plugin publishes (they join the event catalogue)",
      }),
    ),
    eventSchemas: Type.Optional(
      Type.Record(
        Type.String({ pattern: "^[\\w.-]{1,120}$" }),
        Type.Object(
          {
            description: Type.Optional(Type.String({ maxLength: 500 })),
            schema: Type.Record(Type.String(), Type.Unknown(), {
              description: "a JSON Schema (draft-07) of the event's data",
            }),
            example: Type.Optional(
              Type.Unknown({ description: "an example of the data; it must match the schema" }),
            ),
          },
          { additionalProperties: false },
        ),
        {
          description:
            "for events named in `events`: a description, the JSON Schema of the data and an example, served by the event catalogue (GET /api/events/catalog)",
        },
      ),
    ),
  },
  { additionalProperties: true, title: "svc plugin registry.json" },
);
export type RegistryJson = Static<typeof RegistryJsonSchema>;

/** Every key a plugin contributes: its declared keys and its admin-API extension's. */
export function contributedKeys(r: RegistryJson): string[] {
  return [...new Set([...(r[PERMISSIONS_PROPERTY] ?? []), ...(r.adminApi?.permissions ?? [])])];
}

const check = TypeCompiler.Compile(RegistryJsonSchema);

export interface RegistryViolation {
  readonly field: string;
  readonly message: string;
}

export interface RegistryContext {
  /** This host's version (root package.json); absent (an author's check): the host range is not tried. */
  readonly hostVersion?: string;
  /** Installed plugins by id → version, for dependency ranges; absent: plugin ranges are not tried. */
  readonly installed?: ReadonlyMap<string, string>;
}

/** Every rule registry.json breaks, empty when it is valid. */
export function validateRegistry(raw: unknown, context: RegistryContext): RegistryViolation[] {
  const out: RegistryViolation[] = [];
  const add = (field: string, message: string) => out.push({ field: `/registry.json/${field}`, message });
  if (check.Check(raw)) {
    rules(raw, context, add);
    return out;
  }
  for (const e of check.Errors(raw)) {
    out.push({ field: `/registry.json${e.path}`, message: e.message });
    if (out.length >= 50) return out;
  }
  // Every rule at once: the other rules run too, over the members that keep their own schema (none that
  // needs the plugin's namespace runs without a valid pluginId).
  if (typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
    const members = RegistryJsonSchema.properties as Record<string, TSchema>;
    const kept = Object.fromEntries(
      Object.entries(raw).filter(
        ([key, value]) => members[key] !== undefined && Value.Check(members[key], value),
      ),
    ) as Partial<RegistryJson>;
    if (typeof kept.pluginId === "string") rules(kept as RegistryJson, context, add);
  }
  return out;
}

/** The rules beyond the schema, over a registry.json whose members each keep their schema. */
function rules(
  r: RegistryJson,
  context: RegistryContext,
  add: (field: string, message: string) => void,
): void {
  // (Absent only when the schema failed: it names them.)
  if (r.version !== undefined && !semver.valid(r.version)) {
    add("version", `'${r.version}' is not a semantic version`);
  }
  const contract = r.contractVersion === undefined ? undefined : semver.coerce(r.contractVersion);
  if (
    contract === null ||
    (contract !== undefined && !semver.satisfies(contract, PLUGIN_CONTRACT.supported))
  ) {
    add(
      "contractVersion",
      `'${r.contractVersion}' is outside the contract versions this host supports (${PLUGIN_CONTRACT.supported})`,
    );
  }
  if (RESERVED_NAMESPACES.has(r.pluginId)) {
    add("pluginId", `'${r.pluginId}' is a namespace the host reserves`);
  }
  for (const [name, range] of Object.entries(r.dependencies ?? {})) {
    if (semver.validRange(range) === null) {
      add(`dependencies/${name}`, `'${range}' is not a semver range`);
    } else if (name === HOST_DEPENDENCY) {
      const host = context.hostVersion;
      if (host !== undefined && !semver.satisfies(host, range, { includePrerelease: true })) {
        add(`dependencies/${name}`, `needs host ${range}; this host is ${host}`);
      }
    } else if (context.installed !== undefined) {
      const installed = context.installed.get(name);
      if (installed === undefined)
        add(`dependencies/${name}`, `needs plugin '${name}' ${range}, which is not installed`);
      else if (!semver.satisfies(installed, range, { includePrerelease: true })) {
        add(`dependencies/${name}`, `needs plugin '${name}' ${range}; ${installed} is installed`);
      }
    }
  }
  (r[PERMISSIONS_PROPERTY] ?? []).forEach((key, i) => {
    const field = `${PERMISSIONS_PROPERTY}/${i}`;
    if (key !== key.toLowerCase()) add(field, `'${key}' is not lower case`);
    if (!key.startsWith(`${r.pluginId}.`))
      add(field, `'${key}' is outside the plugin's namespace '${r.pluginId}.'`);
    const parts = key.split(".");
    if (parts.length < 3 || parts.some((p) => !/^[a-z0-9][a-z0-9-]*$/.test(p))) {
      add(field, `'${key}' is not <pluginId>.<resource>.<action>`);
    } else if (!KEY_ACTIONS.includes(parts.at(-1) as (typeof KEY_ACTIONS)[number])) {
      add(field, `'${key}' does not end in a known action (${KEY_ACTIONS.join(", ")})`);
    }
  });
  // Events: a plugin names only its own, `<pluginId>.<name>`; never the platform's.
  (r.events ?? []).forEach((name, i) => {
    if (!name.startsWith(`${r.pluginId}.`) || name.length === r.pluginId.length + 1) {
      add(`events/${i}`, `'${name}' is outside the plugin's namespace '${r.pluginId}.'`);
    }
  });
  eventSchemaViolations(r, add);
  // Keys of the admin-API extension path: the namespace rule applies, the action rule does not.
  (r.adminApi?.permissions ?? []).forEach((key, i) => {
    const field = `adminApi/permissions/${i}`;
    if (!key.startsWith(`${r.pluginId}.`) || key !== key.toLowerCase()) {
      add(field, `'${key}' is outside the plugin's namespace '${r.pluginId}.' (lower case)`);
    } else if (key.split(".").some((p) => !/^[a-z0-9][a-z0-9-]*$/.test(p)) || key.split(".").length < 2) {
      add(field, `'${key}' is not <pluginId>.<segment>[.<segment>…]`);
    }
  });
  // Custom fields: a plugin's own entities live in its namespace; a key is defined once per entity.
  const fieldKeys = new Set<string>();
  (r.customFields ?? []).forEach((f, i) => {
    const entity = f.entityName;
    if (entity.includes(".") && !entity.startsWith(`${r.pluginId}.`)) {
      add(`customFields/${i}/entityName`, `'${entity}' is outside the plugin's namespace '${r.pluginId}.'`);
    }
    if (fieldKeys.has(`${entity}/${f.key}`))
      add(`customFields/${i}/key`, `'${f.key}' is defined twice on '${entity}'`);
    fieldKeys.add(`${entity}/${f.key}`);
    if (f.type === "select" && (f.options ?? []).length === 0)
      add(`customFields/${i}/options`, "a select field needs options");
  });
  const seen = new Set<string>();
  (r.routes ?? []).forEach((route, i) => {
    const field = `routes/${i}`;
    const first = route.path.split("/")[1] ?? "";
    if (RESERVED_ROUTE_SEGMENTS.has(first))
      add(`${field}/path`, `'/${first}' is a host route under /api/plugins/{id}`);
    const shape = `${route.method} ${route.path.replace(/:[^/]+/g, ":")}`;
    if (seen.has(shape)) add(field, `${route.method} ${route.path} is declared twice`);
    seen.add(shape);
    const key = route.permission ?? "";
    if (key !== "" && !contributedKeys(r).includes(key)) {
      add(
        `${field}/permission`,
        `'${key}' is not a key the plugin declares (permissions or adminApi.permissions)`,
      );
    } else if (key !== "" && !key.startsWith(`${r.pluginId}.`)) {
      add(`${field}/permission`, `'${key}' is outside the plugin's namespace '${r.pluginId}.'`);
    }
  });
}

/** How large one event's entry in `eventSchemas` may be, and all of them together (JSON text). */
export const EVENT_SCHEMA_LIMITS = { entryBytes: 16 * 1024, totalBytes: 64 * 1024 } as const;

/**
 * `eventSchemas`: only declared events, each schema one Ajv compiles (draft-07; an unknown keyword or
 * format is refused rather than ignored), each example valid against it, and within the size limits (the catalogue carries
 * them to every dispatcher).
 */
function eventSchemaViolations(r: RegistryJson, add: (field: string, message: string) => void): void {
  const entries = Object.entries(r.eventSchemas ?? {});
  if (entries.length === 0) return;
  const declared = new Set(r.events ?? []);
  if (Buffer.byteLength(JSON.stringify(r.eventSchemas)) > EVENT_SCHEMA_LIMITS.totalBytes)
    add("eventSchemas", `is over ${EVENT_SCHEMA_LIMITS.totalBytes / 1024} KiB as JSON`);
  const ajv = new Ajv({ strict: false, strictSchema: true, allErrors: true, logger: false });
  addFormats.default(ajv);
  for (const [name, entry] of entries) {
    const field = `eventSchemas/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`;
    if (!declared.has(name)) {
      add(field, `'${name}' is not one of the plugin's declared events`);
      continue;
    }
    if (Buffer.byteLength(JSON.stringify(entry)) > EVENT_SCHEMA_LIMITS.entryBytes) {
      add(field, `is over ${EVENT_SCHEMA_LIMITS.entryBytes / 1024} KiB as JSON`);
      continue;
    }
    let validate: ReturnType<typeof ajv.compile>;
    try {
      validate = ajv.compile(entry.schema);
    } catch (error) {
      add(`${field}/schema`, `is not a JSON Schema Ajv compiles: ${(error as Error).message.slice(0, 300)}`);
      continue;
    }
    if (entry.example !== undefined && !validate(entry.example)) {
      const first = validate.errors?.[0];
      add(
        `${field}/example`,
        `does not match the schema: ${first?.instancePath || "/"} ${first?.message ?? "is invalid"}`,
      );
    }
  }
}
