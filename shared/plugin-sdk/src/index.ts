/**
 * The plugin SDK: the types a plugin builds against (docs/plugins.md). The entry module's export and the
 * host API it is given, what a route handler receives and returns, and the three files of a package:
 * `registry.json` ({@link PluginDescriptor}), `theme.json` ({@link ThemeDescriptor}) and
 * `plugin.signature.json` ({@link SignatureManifest}).
 *
 * A plugin in JavaScript uses these through JSDoc (docs/plugins.md, "Types"); in TypeScript it imports
 * them. The platform's validator and signer use the same declarations, and a test checks that the runtime
 * gives a plugin exactly the host API and request declared here.
 *
 * This is public interface, tracked by `make api-check` against its baselines in docs/api/ (see
 * docs/releasing.md). Adding optional members is free; changing or removing a shipped
 * declaration breaks plugins and needs a new major {@link PLUGIN_CONTRACT_VERSION}.
 *
 * @packageDocumentation
 */
import type { PluginHttpReply, PluginHttpRequest, Principal } from "@svc/wire-contract";

export type { PluginHttpReply, PluginHttpRequest, PluginRouteRef, Principal } from "@svc/wire-contract";
export { Scope } from "@svc/wire-contract";

/**
 * The plugin contract this SDK describes, as `registry.json`'s `contractVersion` names it. A host accepts
 * every contract version of the same major (`>=1.0.0 <2.0.0` for `1.0`).
 */
export const PLUGIN_CONTRACT_VERSION = "1.0";

// ---------------------------------------------------------------------------------------------------
// The entry module

/** The plugin's log: lines go to the plugin registry's log with the plugin id. `console` is discarded. */
export interface PluginLog {
  debug(message: string, data?: unknown): void;
  info(message: string, data?: unknown): void;
  warn(message: string, data?: unknown): void;
  error(message: string, data?: unknown): void;
}

/** An event on its way out, as publisher decorators see it. */
export interface PluginEvent {
  /** One of the names registry.json's `events` declares. */
  readonly eventName: string;
  /** null: a platform-wide event. */
  readonly workspaceKey: string | null;
  /** JSON; it becomes `data` of webhook deliveries. */
  readonly payload: unknown;
}

/**
 * Wraps every publish, in the order decorators were added: it may change the event and pass it on with
 * `next`, or drop it by not calling `next`.
 */
export type PublisherDecorator = (
  event: PluginEvent,
  next: (event: PluginEvent) => Promise<void>,
) => Promise<void> | void;

/** The publisher contract: event name, workspace key (null: platform-wide), payload. */
export interface PluginEvents {
  /** Publishes durably to the platform's event stream; resolves once stored. */
  publish(eventName: string, workspaceKey: string | null, payload: unknown): Promise<void>;
  /** Adds a decorator around every later publish. */
  decorate(decorator: PublisherDecorator): void;
}

/** What the host gives the entry export: the constructor's or factory's argument, and `activate`'s. */
export interface PluginHost {
  readonly pluginId: string;
  /** The installed version (registry.json's `version`). */
  readonly version: string;
  readonly log: PluginLog;
  readonly events: PluginEvents;
}

/** What a route handler receives (docs/wire-contract.md, "Serving a plugin's routes"). */
export type PluginRequest = PluginHttpRequest;

/** A full answer; `headers` names must be letters, digits and `-` (others are dropped). */
export type PluginResponse = PluginHttpReply;

/** A JSON value. */
export type JsonValue =
  string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * What a route handler returns: a {@link PluginResponse} (a value with a numeric `status`), any other
 * value as a 200 JSON body, or nothing (`undefined`, `null`) for a 204. A throw is a 502
 * `SVC_PLUGIN_FAILED` for the caller.
 */
export type HandlerResult = PluginResponse | JsonValue | undefined;

/** A route handler: a method of the entry object that registry.json's `routes[].handler` names. */
export type RouteHandler = (request: PluginRequest) => HandlerResult | Promise<HandlerResult>;

/**
 * The lifecycle methods the host calls on the entry object when it has them. The entry object also has
 * the route handlers ({@link RouteHandler}) by the names registry.json's routes give.
 */
export interface PluginEntry {
  /** Called once after construction, before any route is served. A throw fails the activation. */
  activate?(host: PluginHost): void | Promise<void>;
  /** Called before the plugin is unloaded (one second at most). */
  deactivate?(): void | Promise<void>;
}

/**
 * What registry.json's `entryTypeName` may name: a class (constructed with the host API), a function
 * (called with it; it may be async) or an object. What it gives is the entry object: any object, with the
 * {@link PluginEntry} methods it needs and its route handlers.
 */
export type PluginEntryExport =
  (new (host: PluginHost) => object) | ((host: PluginHost) => object | Promise<object>) | object;

/** The caller of a route, as the gateway established it. */
export type PluginPrincipal = Principal;

// ---------------------------------------------------------------------------------------------------
// registry.json

/** A route the plugin serves at `/api/plugins/<pluginId><path>`. */
export interface PluginRouteDeclaration {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Starts with `/`; `:name` segments are parameters. */
  readonly path: string;
  /** The key the caller must hold (or `*`); empty or absent: any signed-in caller. */
  readonly permission?: string;
  /** The entry object's method that answers. */
  readonly handler: string;
}

/** A custom field the plugin defines on a platform entity or one of its own (`<pluginId>.<name>`). */
export interface CustomFieldDeclaration {
  readonly entityName: string;
  readonly key: string;
  readonly label?: string;
  readonly type?: "text" | "number" | "boolean" | "select" | "url" | "color" | "date" | "email";
  readonly required?: boolean;
  /** For `select`. */
  readonly options?: readonly string[];
  readonly description?: string;
}

/** A browser file under the package's `ui/` directory. */
export interface UiAssetDeclaration {
  readonly surface: "admin" | "workspace";
  /** `ui/…` */
  readonly path: string;
}

/** `registry.json`, the plugin descriptor; its JSON Schema is `docs/schemas/registry.schema.json`. */
export interface PluginDescriptor {
  readonly $schema?: string;
  /** The plugin contract built against ({@link PLUGIN_CONTRACT_VERSION}). */
  readonly contractVersion: string;
  /** The version of this descriptor's format, `"1.0"`. */
  readonly schemaVersion: string;
  readonly name: string;
  /** Stable id: `^[a-z][a-z0-9-]{1,62}$`, not a namespace the host reserves. */
  readonly pluginId: string;
  /** Semantic version. */
  readonly version: string;
  /** Path of the entry ES module inside the package. */
  readonly assemblyFileName: string;
  /** The entry module's export ({@link PluginEntryExport}). */
  readonly entryTypeName: string;
  readonly tier?: "system" | "application";
  readonly capabilities?: readonly string[];
  readonly requiresCapabilities?: readonly string[];
  /** Other plugins by semver range; the key `host` is the host itself. */
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly extensions?: ReadonlyArray<{ readonly extensionPointId: string; readonly surface: string }>;
  /** Payload property names masked in webhook deliveries. */
  readonly sensitiveFields?: readonly string[];
  /** Permission keys the plugin declares: `<pluginId>.<resource>.<create|read|update|delete|execute>`. */
  readonly permissions?: readonly string[];
  /** Keys the plugin's admin-API extension contributes: inside the plugin's namespace, any last segment. */
  readonly adminApi?: { readonly permissions?: readonly string[] };
  readonly customFields?: readonly CustomFieldDeclaration[];
  readonly uiAssets?: {
    readonly entries?: readonly UiAssetDeclaration[];
    readonly styles?: readonly UiAssetDeclaration[];
  };
  /** `worker` (default): the host runs the entry module; `external`: the plugin serves its subject itself. */
  readonly runtime?: "worker" | "external";
  readonly routes?: readonly PluginRouteDeclaration[];
  /** Event names the plugin publishes; it may publish no other. */
  readonly events?: readonly string[];
  /**
   * For events named in `events`: a description, the JSON Schema (draft-07) of the data and an example,
   * served by the event catalogue. Each entry up to 16 KiB as JSON, all of them up to 64 KiB.
   */
  readonly eventSchemas?: Readonly<Record<string, PluginEventSchema>>;
}

/** What the event catalogue says of one of a plugin's events. */
export interface PluginEventSchema {
  readonly description?: string;
  /** A JSON Schema (draft-07) of the event's data. */
  readonly schema: Readonly<Record<string, unknown>>;
  /** An example of the data: it must match the schema. */
  readonly example?: unknown;
}

// ---------------------------------------------------------------------------------------------------
// theme.json (canonical names; the host also reads the aliases docs/plugins.md lists)

/** A template definition of theme.json. */
export interface ThemeDefinitionDeclaration {
  readonly templateKey: string;
  readonly displayName?: string;
  /** Default `views/surface/<templateKey>.html`; stays inside the package. */
  readonly templatePath?: string;
  readonly parentTemplateKey?: string;
  readonly surface?: string;
  readonly scope?: string;
  readonly isActive?: boolean;
  /** Default 100; the highest active priority wins. */
  readonly priority?: number;
}

/** A setting a workspace can give the theme. */
export interface ThemeFieldDeclaration {
  readonly label?: string;
  readonly type?: "text" | "color" | "number" | "boolean" | "select" | "url";
  readonly helpText?: string;
  readonly value?: string | number | boolean;
  readonly required?: boolean;
  readonly group?: string;
  readonly options?: readonly string[];
  readonly order?: number;
}

/** `theme.json`; its JSON Schema is `docs/schemas/theme.schema.json`. */
export interface ThemeDescriptor {
  readonly $schema?: string;
  readonly surface?: string;
  readonly definitions?: readonly ThemeDefinitionDeclaration[];
  readonly config?: { readonly fields?: Readonly<Record<string, ThemeFieldDeclaration>> };
}

// ---------------------------------------------------------------------------------------------------
// plugin.signature.json

/** A file of the package and the SHA-256 of its bytes. */
export interface SignedFile {
  /** Relative to the package root, `/`-separated. */
  readonly path: string;
  /** Lower-case hex SHA-256 of the file's bytes. */
  readonly sha256: string;
}

/** `plugin.signature.json`, the signed content manifest. */
export interface SignatureManifest {
  readonly schemaVersion: string;
  readonly pluginId: string;
  readonly version: string;
  /** `ECDSA-P256-SHA256`. */
  readonly algorithm: string;
  /** Lower-case hex SHA-256 of the signer's public key (SubjectPublicKeyInfo DER). */
  readonly signerFingerprint: string;
  /** Every file but this one, sorted by path. */
  readonly files: readonly SignedFile[];
  /** Base64 (DER or IEEE P1363); absent before signing. */
  readonly signature?: string;
}
