/**
 * Routes the plugin registry owns (ADR 0003): plugins, trusted signers, entitlements, delegations,
 * workspace plugin chains and themes.
 */
import { type Static, Type } from "@sinclair/typebox";

import { FieldValuesBody, Nullable, Page, pageFields, TenantKey, wkParams, WorkspaceKey } from "./common.js";
import { defineBroadcasts, defineMessages } from "./messages.js";
import { PublicWorkspace, SurfaceData } from "./resolver.js";
import { defineRoutes } from "./route.js";

const PluginId = Type.String({ pattern: "^[a-z][a-z0-9-]{1,62}$" });
const Sha256 = Type.String({ pattern: "^[0-9a-f]{64}$" });

/** What the gateway forwards for an uploaded archive: the bytes are in the package object store. */
export const UploadedPackage = Type.Object({
  package: Type.Object({ sha256: Sha256, size: Type.Integer({ minimum: 1 }), contentType: Type.String() }),
});

/** A package on the host's disk: a directory or an archive under one of BackendHost:PluginLocalRoots. */
const LocalSource = Type.Object(
  { path: Type.String({ minLength: 1, maxLength: 1_024 }) },
  { additionalProperties: false },
);
/** A package from the configured feed (BackendHost:PluginFeedUrl, npm-registry tarball layout). */
const FeedSource = Type.Object(
  {
    packageId: Type.String({ pattern: "^[a-z][a-z0-9-]{1,62}$" }),
    version: Type.String({ pattern: "^[0-9A-Za-z.+-]{1,64}$" }),
  },
  { additionalProperties: false },
);
/** An update to an older version is refused unless asked for. */
const UpdateQuery = Type.Object(
  { allowDowngrade: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);

export const PluginView = Type.Object({
  pluginId: Type.String(),
  name: Type.String(),
  version: Type.String(),
  tier: Type.Union([Type.Literal("system"), Type.Literal("application")]),
  contractVersion: Type.String(),
  signed: Type.Boolean(),
  signerFingerprint: Nullable(Type.String()),
  publisherId: Nullable(Type.String()),
  packageSha256: Type.String(),
  permissions: Type.Array(Type.String()),
  sensitiveFields: Type.Array(Type.String()),
  events: Type.Array(Type.String()),
  isActive: Type.Boolean(),
  /**
   * The lifecycle state (docs/plugins.md): `inactive` after install or deactivation, `active` while it runs
   * on every registry replica, `failed` when the runtime stopped it (a crash, a hang, memory, an exit).
   */
  state: Type.Union([Type.Literal("inactive"), Type.Literal("active"), Type.Literal("failed")]),
  /** Why the runtime stopped the plugin, while `failed`. */
  failureReason: Nullable(Type.String()),
  /** The routes it declares, dispatched by the gateway under /api/plugins/{pluginId}/ while active. */
  routes: Type.Array(Type.Object({ method: Type.String(), path: Type.String(), permission: Type.String() })),
  /** `refused` when the stored package failed verification at the registry's last start. */
  trustStatus: Type.Union([Type.Literal("trusted"), Type.Literal("refused")]),
  refusedReason: Nullable(Type.String()),
  installedAtUtc: Type.String(),
  updatedAtUtc: Type.String(),
});

const SignatureReport = Type.Object({
  checkedAtUtc: Type.String(),
  items: Type.Array(
    Type.Object({
      pluginId: Type.String(),
      version: Type.String(),
      status: Type.Union([Type.Literal("valid"), Type.Literal("invalid"), Type.Literal("unsigned")]),
      code: Nullable(Type.String()),
      reason: Nullable(Type.String()),
    }),
  ),
});

const AuditEntry = Type.Object({
  id: Type.String(),
  atUtc: Type.String(),
  actor: Type.String(),
  /** The actor's user name when a signed-in user acted (null for API keys and the platform itself). */
  actorName: Nullable(Type.String()),
  action: Type.String(),
  pluginId: Nullable(Type.String()),
  version: Nullable(Type.String()),
  outcome: Type.Union([Type.Literal("succeeded"), Type.Literal("failed")]),
  reason: Nullable(Type.String()),
});

const Source = Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,62}$" });
/** How a workspace or tenant is entitled to a plugin: its own grant, its tenant's, or a system-tier plugin. */
const Via = Nullable(Type.Union([Type.Literal("workspace"), Type.Literal("tenant"), Type.Literal("system")]));

const TenantEntitlement = Type.Object({
  tenantKey: Type.String(),
  pluginId: Type.String(),
  entitled: Type.Boolean(),
  via: Via,
  expiresAtUtc: Nullable(Type.String()),
});
const WorkspaceEntitlement = Type.Composite([
  Type.Object({ workspaceKey: Type.String() }),
  TenantEntitlement,
]);
/** One grant: to a tenant (all its workspaces) or to one workspace. */
const EntitlementView = Type.Object({
  tenantKey: Nullable(Type.String()),
  workspaceKey: Nullable(Type.String()),
  pluginId: Type.String(),
  source: Type.String(),
  expiresAtUtc: Nullable(Type.String()),
  grantedBy: Type.String(),
  grantedAtUtc: Type.String(),
});
/** Exactly one of tenantKey and workspaceKey names who is entitled. */
const Grantee = {
  tenantKey: Type.Optional(TenantKey),
  workspaceKey: Type.Optional(WorkspaceKey),
  pluginId: PluginId,
  expiresAtUtc: Type.Optional(Nullable(Type.String({ format: "date-time" }))),
};
const Delegation = Type.Object({
  tenantKey: Type.String(),
  pluginId: Type.String(),
  delegated: Type.Boolean(),
  delegatedBy: Nullable(Type.String()),
  delegatedAtUtc: Nullable(Type.String()),
});

const TemplateKey = Type.String({ pattern: "^[A-Za-z0-9_.-]{1,100}$" });
const Version = Type.String({ pattern: "^[0-9A-Za-z.+-]{1,64}$" });
const TemplateDefinition = Type.Object({
  templateKey: Type.String(),
  pluginId: Type.String(),
  version: Type.String(),
  displayName: Type.String(),
  templatePath: Type.String(),
  parentTemplateKey: Nullable(Type.String()),
  surface: Type.String(),
  scope: Type.String(),
  isActive: Type.Boolean(),
  priority: Type.Integer(),
  /** `package` (from theme.json) or `api` (registered through the definitions route). */
  source: Type.String(),
});
/** A template the workspace uses: the winning definition per key, with the keys it inherits from. */
const EffectiveTemplate = Type.Object({
  templateKey: Type.String(),
  pluginId: Type.String(),
  version: Type.String(),
  displayName: Type.String(),
  templatePath: Type.String(),
  parentTemplateKey: Nullable(Type.String()),
  /** This key, then its parent, grandparent, … as far as they resolve. */
  inheritance: Type.Array(Type.String()),
  surface: Type.String(),
  scope: Type.String(),
  priority: Type.Integer(),
});
const EffectiveTemplates = Type.Object({
  workspaceKey: Type.String(),
  themePluginId: Nullable(Type.String()),
  themeVersion: Nullable(Type.String()),
  templates: Type.Array(EffectiveTemplate),
});
/** A workspace's theme; sectionLayouts: the setting fields by group, in order. */
export const ThemeView = Type.Object({
  workspaceKey: Type.String(),
  themePluginId: Nullable(Type.String()),
  themeVersion: Nullable(Type.String()),
  valuesByKey: Type.Record(Type.String(), Type.String()),
  sectionLayouts: Type.Array(Type.Object({ section: Type.String(), keys: Type.Array(Type.String()) })),
});
const SettingField = Type.Object({
  key: Type.String(),
  label: Type.String(),
  type: Type.String(),
  helpText: Nullable(Type.String()),
  value: Nullable(Type.String()),
  required: Type.Boolean(),
  group: Nullable(Type.String()),
  options: Type.Array(Type.String()),
  order: Type.Number(),
});
const ThemeSettings = Type.Object({
  workspaceKey: Type.String(),
  themePluginId: Nullable(Type.String()),
  themeVersion: Nullable(Type.String()),
  fields: Type.Array(SettingField),
  valuesByKey: Type.Record(Type.String(), Type.String()),
});
const DefinitionParams = Type.Object({ templateKey: TemplateKey, pluginId: PluginId, version: Version });

/** A workspace's ordered plugin chain: chain[0] is the primary. */
const WorkspacePlugins = Type.Object({
  workspaceKey: Type.String(),
  tenantKey: Nullable(Type.String()),
  chain: Type.Array(
    Type.Object({
      pluginId: Type.String(),
      version: Type.String(),
      state: Type.String(),
      /** False once the entitlement that allowed it is gone or expired: it then counts for nothing. */
      entitled: Type.Boolean(),
      position: Type.Integer(),
    }),
  ),
  updatedAtUtc: Nullable(Type.String()),
});

/** Issue an external backend's NATS credentials. */
const CredentialRequest = Type.Object(
  {
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 120, description: "a label: where it is used" }),
    ),
    ttlSeconds: Type.Optional(
      Type.Integer({
        minimum: 60,
        maximum: 31_536_000,
        description:
          "lifetime; default 7 days. A revoked credential works until it expires (docs/operator-guide.md)",
      }),
    ),
  },
  { additionalProperties: false },
);
/** An issued credential, without its secret. */
const CredentialView = Type.Object({
  credentialId: Type.String({ format: "uuid" }),
  pluginId: Type.String(),
  name: Nullable(Type.String()),
  /** The NATS user's public key (`U…`): what the server logs name. */
  publicKey: Type.String(),
  createdBy: Type.String(),
  createdAtUtc: Type.String(),
  expiresAtUtc: Type.String(),
  revokedAtUtc: Nullable(Type.String()),
});
/** The credential as issued: the `.creds` file's text, shown this once. */
const IssuedCredential = Type.Intersect([
  CredentialView,
  Type.Object({
    creds: Type.String({
      description: "the .creds file (user JWT and nkey seed): shown once, keep it secret",
    }),
    subjects: Type.Object({
      serve: Type.String(),
      queue: Type.String(),
      inboxPrefix: Type.String(),
      publish: Type.Array(Type.String()),
    }),
  }),
]);

export const pluginRegistryRoutes = defineRoutes("plugin-registry", {
  "plugins.credentials.issue": {
    method: "POST",
    secretReply: true,
    path: "/api/plugins/:id/credentials",
    permission: "plugin.execute",
    platformOnly: true,
    summary: "Issue NATS credentials for an external plugin backend (its own subjects only)",
    params: Type.Object({ id: PluginId }),
    body: CredentialRequest,
    reply: IssuedCredential,
  },
  "plugins.credentials.list": {
    method: "GET",
    path: "/api/plugins/:id/credentials",
    permission: "plugin.read",
    platformOnly: true,
    summary: "List the NATS credentials issued for a plugin (without their secrets)",
    params: Type.Object({ id: PluginId }),
    reply: Type.Array(CredentialView),
  },
  "plugins.credentials.revoke": {
    method: "DELETE",
    path: "/api/plugins/:id/credentials/:credentialId",
    permission: "plugin.execute",
    platformOnly: true,
    summary: "Revoke a plugin's NATS credential",
    params: Type.Object({ id: PluginId, credentialId: Type.String({ format: "uuid" }) }),
  },
  "plugins.install": {
    method: "POST",
    path: "/api/plugins/install",
    permission: "plugin.create",
    summary: "Install a plugin package",
    upload: true,
    body: UploadedPackage,
    reply: PluginView,
  },
  "plugins.install-local": {
    method: "POST",
    path: "/api/plugins/install/local",
    permission: "plugin.create",
    summary: "Install a plugin from the host's disk",
    body: LocalSource,
    reply: PluginView,
  },
  "plugins.install-feed": {
    method: "POST",
    path: "/api/plugins/install/nuget",
    permission: "plugin.create",
    summary: "Install a plugin from a package feed",
    body: FeedSource,
    reply: PluginView,
  },
  "plugins.update-feed": {
    method: "POST",
    path: "/api/plugins/:id/update/nuget",
    permission: "plugin.create",
    summary: "Update a plugin from a package feed",
    params: Type.Object({ id: PluginId }),
    query: UpdateQuery,
    body: FeedSource,
    reply: PluginView,
  },
  "plugins.update-upload": {
    method: "POST",
    path: "/api/plugins/:id/update",
    permission: "plugin.create",
    summary: "Update a plugin with an uploaded package (its chain places and theme choices are kept)",
    upload: true,
    params: Type.Object({ id: PluginId }),
    query: UpdateQuery,
    body: UploadedPackage,
    reply: PluginView,
  },
  "plugins.update-local": {
    method: "POST",
    path: "/api/plugins/:id/update/local",
    permission: "plugin.create",
    summary: "Update a plugin from the host's disk",
    params: Type.Object({ id: PluginId }),
    query: UpdateQuery,
    body: LocalSource,
    reply: PluginView,
  },
  "plugins.list": {
    method: "GET",
    path: "/api/plugins",
    permission: "plugin.read",
    summary: "List plugins",
    reply: Type.Array(PluginView),
  },
  "plugins.installed": {
    method: "GET",
    path: "/api/plugins/installed",
    permission: "plugin.read",
    summary: "List installed plugins",
    reply: Type.Array(PluginView),
  },
  "plugins.signature-report": {
    method: "GET",
    path: "/api/plugins/signature-report",
    permission: "plugin.read",
    summary: "Re-verify every installed plugin",
    reply: SignatureReport,
  },
  "plugins.audit": {
    method: "GET",
    path: "/api/plugins/audit",
    permission: "plugin.read",
    summary: "Plugin lifecycle audit (newest first; ?pluginId= keeps one plugin's entries)",
    query: Type.Object({ pluginId: Type.Optional(PluginId), ...pageFields }, { additionalProperties: false }),
    reply: Page(AuditEntry),
  },
  "contracts.support": {
    method: "GET",
    path: "/api/plugins/contracts/support",
    permission: "plugin.read",
    summary: "Supported plugin contracts",
    reply: Type.Object({
      hostVersion: Type.String(),
      contractVersion: Type.String(),
      supportedContractVersions: Type.String(),
      hostDependencyKey: Type.String(),
      permissionsProperty: Type.String(),
    }),
  },
  "contracts.compatibility": {
    method: "GET",
    path: "/api/plugins/contracts/compatibility",
    permission: "plugin.read",
    summary: "Plugin contract compatibility",
    reply: Type.Array(
      Type.Object({
        pluginId: Type.String(),
        version: Type.String(),
        contractVersion: Type.String(),
        compatible: Type.Boolean(),
        reasons: Type.Array(Type.String()),
      }),
    ),
  },
  "signers.list": {
    method: "GET",
    path: "/api/plugins/security/trusted-signers",
    permission: "plugin.read",
    summary: "List trusted signers",
    reply: Type.Array(
      Type.Object({
        publisherId: Type.String(),
        displayName: Type.String(),
        fingerprint: Type.String(),
        source: Type.String(),
        revoked: Type.Boolean(),
      }),
    ),
  },
  "entitlements.workspace": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey/entitlements/:pluginId",
    permission: "plugin.read",
    summary: "Whether a workspace may use a plugin, and through what",
    params: Type.Object({ workspaceKey: WorkspaceKey, pluginId: PluginId }),
    reply: WorkspaceEntitlement,
  },
  "entitlements.tenant": {
    method: "GET",
    path: "/api/tenants/:tenantId/entitlements/:pluginId",
    permission: "plugin.read",
    platformOnly: true,
    summary: "Whether a tenant (all its workspaces) may use a plugin",
    params: Type.Object({ tenantId: TenantKey, pluginId: PluginId }),
    reply: TenantEntitlement,
  },
  "entitlements.list": {
    method: "GET",
    path: "/api/entitlements",
    permission: "plugin.read",
    platformOnly: true,
    summary: "The entitlement grants, filtered by tenant, workspace, plugin or source",
    query: Type.Object(
      {
        tenantKey: Type.Optional(TenantKey),
        workspaceKey: Type.Optional(WorkspaceKey),
        pluginId: Type.Optional(PluginId),
        source: Type.Optional(Source),
        ...pageFields,
      },
      { additionalProperties: false },
    ),
    reply: Page(EntitlementView),
  },
  "plugins.uninstall": {
    method: "DELETE",
    path: "/api/plugins/:id",
    permission: "plugin.delete",
    summary: "Uninstall a plugin",
    params: Type.Object({ id: PluginId }),
  },
  "plugins.activate": {
    method: "POST",
    path: "/api/plugins/:id/activate",
    permission: "plugin.execute",
    summary: "Activate a plugin: load it in the runtime of every registry replica",
    params: Type.Object({ id: PluginId }),
    reply: PluginView,
  },
  "plugins.deactivate": {
    method: "POST",
    path: "/api/plugins/:id/deactivate",
    permission: "plugin.execute",
    summary: "Deactivate a plugin: unload it everywhere",
    params: Type.Object({ id: PluginId }),
    reply: PluginView,
  },
  "entitlements.put": {
    method: "PUT",
    path: "/api/entitlements",
    permission: "plugin.execute",
    platformOnly: true,
    summary: "Grant (entitled: true) or withdraw (false) entitlements, source `manual`",
    body: Type.Object(
      {
        items: Type.Array(
          Type.Object({ ...Grantee, entitled: Type.Boolean() }, { additionalProperties: false }),
          { minItems: 1, maxItems: 500 },
        ),
      },
      { additionalProperties: false },
    ),
    reply: Type.Object({ granted: Type.Integer(), withdrawn: Type.Integer() }),
  },
  "entitlements.sync": {
    method: "POST",
    path: "/api/entitlements/sync",
    permission: "plugin.execute",
    platformOnly: true,
    summary: "Replace every grant of one source (a billing system's full list) in one step",
    body: Type.Object(
      {
        source: Source,
        items: Type.Array(Type.Object(Grantee, { additionalProperties: false }), { maxItems: 10_000 }),
      },
      { additionalProperties: false },
    ),
    reply: Type.Object({
      source: Type.String(),
      added: Type.Integer(),
      removed: Type.Integer(),
      kept: Type.Integer(),
    }),
  },
  "assignments.get": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey/plugins",
    permission: "plugin.assign",
    summary: "A workspace's plugin chain (chain[0] is the primary)",
    params: wkParams,
    reply: WorkspacePlugins,
  },
  "assignments.put": {
    method: "PUT",
    path: "/api/workspaces/:workspaceKey/plugins",
    permission: "plugin.assign",
    summary: "Set a workspace's plugin chain, in order (replaces it; [] removes every plugin)",
    params: wkParams,
    body: Type.Object(
      { chain: Type.Array(PluginId, { maxItems: 50, uniqueItems: true }) },
      { additionalProperties: false },
    ),
    reply: WorkspacePlugins,
  },
  "delegations.list": {
    method: "GET",
    path: "/api/tenants/:tenantKey/plugins/delegations",
    permission: "plugin.assign",
    platformOnly: true,
    summary: "The plugins a tenant's workspace admins may put in their own chains",
    params: Type.Object({ tenantKey: TenantKey }),
    reply: Type.Object({ tenantKey: Type.String(), items: Type.Array(Delegation) }),
  },
  "delegations.put": {
    method: "PUT",
    path: "/api/tenants/:tenantKey/plugins/:pluginId/delegation",
    permission: "plugin.assign",
    platformOnly: true,
    summary: "Delegate a plugin to a tenant (delegated: true) or take it back (false)",
    params: Type.Object({ tenantKey: TenantKey, pluginId: PluginId }),
    body: Type.Object({ delegated: Type.Boolean() }, { additionalProperties: false }),
    reply: Delegation,
  },
  "themes.definitions": {
    method: "GET",
    path: "/api/themes/definitions",
    permission: "extension.read",
    summary: "The template definitions of the installed plugins' versions",
    query: Type.Object(
      { pluginId: Type.Optional(PluginId), surface: Type.Optional(Type.String({ maxLength: 50 })) },
      { additionalProperties: false },
    ),
    reply: Type.Object({ items: Type.Array(TemplateDefinition) }),
  },
  "themes.workspace": {
    method: "GET",
    path: "/api/themes/workspaces/:workspaceKey",
    permission: "extension.read",
    summary: "A workspace's theme: its theme plugin and token values",
    params: wkParams,
    reply: ThemeView,
  },
  "themes.effective": {
    method: "GET",
    path: "/api/themes/workspaces/:workspaceKey/effective",
    permission: "extension.read",
    summary: "The templates a workspace uses, resolved over its theme plugin and chain",
    params: wkParams,
    reply: EffectiveTemplates,
  },
  "themes.settings": {
    method: "GET",
    path: "/api/themes/workspaces/:workspaceKey/settings",
    permission: "extension.read",
    summary: "A workspace's theme settings: the field definitions and the values",
    params: wkParams,
    reply: ThemeSettings,
  },
  "themes.effective-current": {
    method: "GET",
    path: "/workspace/themes/effective",
    permission: "extension.read",
    summary:
      "The caller's workspace's effective templates (workspaceKey: platform sessions; default `default`)",
    query: Type.Object(
      { workspaceKey: Type.Optional(Type.String({ maxLength: 63 })) },
      { additionalProperties: false },
    ),
    reply: EffectiveTemplates,
  },
  "themes.definition-put": {
    method: "PUT",
    path: "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version",
    permission: "extension.update",
    platformOnly: true,
    summary: "Register or change a template definition of an installed plugin version",
    params: DefinitionParams,
    body: Type.Object(
      {
        displayName: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
        templatePath: Type.Optional(
          // Relative, inside the package: no segment starts with a dot, so no `..`.
          Type.String({
            pattern: "^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*$",
            maxLength: 300,
          }),
        ),
        parentTemplateKey: Type.Optional(Nullable(TemplateKey)),
        surface: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
        scope: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
        isActive: Type.Optional(Type.Boolean()),
        priority: Type.Optional(Type.Integer({ minimum: -100_000, maximum: 100_000 })),
      },
      { additionalProperties: false },
    ),
    reply: TemplateDefinition,
  },
  "themes.definition-activation": {
    method: "PUT",
    path: "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version/activation",
    permission: "extension.update",
    platformOnly: true,
    summary: "Switch a template definition on or off",
    params: DefinitionParams,
    body: Type.Object({ isActive: Type.Boolean() }, { additionalProperties: false }),
    reply: TemplateDefinition,
  },
  "themes.workspace-put": {
    method: "PUT",
    path: "/api/themes/workspaces/:workspaceKey",
    permission: "extension.update",
    summary: "Choose a workspace's theme plugin (installed, with a theme.json, entitled)",
    params: wkParams,
    body: Type.Object({ themePluginId: PluginId }, { additionalProperties: false }),
    reply: ThemeView,
  },
  "themes.workspace-delete": {
    method: "DELETE",
    path: "/api/themes/workspaces/:workspaceKey",
    permission: "extension.update",
    summary: "Remove a workspace's theme plugin (its setting values are kept)",
    params: wkParams,
  },
  "themes.settings-put": {
    method: "PUT",
    path: "/api/themes/workspaces/:workspaceKey/settings",
    permission: "extension.update",
    summary:
      "Set theme setting values (checked against each field's type and options; null: back to the default)",
    params: wkParams,
    body: FieldValuesBody,
    reply: ThemeSettings,
  },
});

export const PluginRouteContribution = Type.Object({
  method: Type.String(),
  /** Under /api/plugins/{pluginId}; `:name` segments are parameters. */
  path: Type.String(),
  /** The key a caller must hold; "" for any authenticated caller. */
  permission: Type.String(),
  /** The entry object's method that answers it (in the request on the plugin's subject). */
  handler: Type.String(),
});
export type PluginRouteContribution = Static<typeof PluginRouteContribution>;

/** What one installed plugin adds: keys to rbac's catalogue, fields to webhook masking, event names. */
export const PluginContribution = Type.Object({
  pluginId: Type.String(),
  version: Type.String(),
  permissions: Type.Array(Type.String()),
  sensitiveFields: Type.Array(Type.String()),
  events: Type.Array(Type.String()),
  /** What its registry.json's `eventSchemas` says of its events: the event catalogue serves it. */
  eventSchemas: Type.Array(
    Type.Object({
      eventName: Type.String(),
      description: Nullable(Type.String()),
      schema: Type.Record(Type.String(), Type.Unknown()),
      example: Type.Optional(Type.Unknown()),
    }),
  ),
  /** The lifecycle state: only an `active` plugin serves routes and supplies session keys. */
  state: Type.Union([Type.Literal("inactive"), Type.Literal("active"), Type.Literal("failed")]),
  /** Its routes, dispatched by the gateway under /api/plugins/{pluginId}/ while active. */
  routes: Type.Array(PluginRouteContribution),
  /** The workspaces whose chain holds it (their admins' sessions carry its keys). */
  workspaces: Type.Array(Type.String()),
  /** The custom fields it defines. */
  customFields: Type.Array(
    Type.Object({
      entityName: Type.String(),
      key: Type.String(),
      label: Type.String(),
      type: Type.String(),
      required: Type.Boolean(),
      options: Type.Array(Type.String()),
      description: Nullable(Type.String()),
    }),
  ),
});
export type PluginContribution = Static<typeof PluginContribution>;

/** A workspace's theme as the public routes show it. */
export const PublicTheme = Type.Object({
  workspaceKey: Type.String(),
  themePluginId: Nullable(Type.String()),
  themeVersion: Nullable(Type.String()),
  valuesByKey: Type.Record(Type.String(), Type.String()),
  sectionLayouts: Type.Array(Type.Object({ section: Type.String(), keys: Type.Array(Type.String()) })),
});
export type PublicTheme = Static<typeof PublicTheme>;

/** The rendered surface, or null with the reason the gateway serves the shell instead. */
export const RenderedSurface = Type.Object({
  html: Nullable(Type.String()),
  reason: Type.Union([
    Type.Literal("rendered"),
    Type.Literal("no-chain"),
    Type.Literal("not-loaded"),
    Type.Literal("no-entry"),
    Type.Literal("template-error"),
  ]),
});
export type RenderedSurface = Static<typeof RenderedSurface>;

/** What the plugin registry answers to the other services. */
export const pluginRegistryMessages = defineMessages("plugin-registry", {
  "contributions.list": {
    summary: "What every installed plugin contributes to the other services",
    request: Type.Object({}),
    reply: Type.Object({ plugins: Type.Array(PluginContribution) }),
  },
  "workspace.public": {
    summary: "A workspace's public UI chain and theme",
    request: Type.Object({ workspaceKey: Type.String({ maxLength: 63 }) }),
    reply: Type.Object({ chain: Type.Array(Type.String()), theme: PublicTheme }),
  },
  "surface.render": {
    summary: "Renders a workspace's surface over its plugin chain",
    request: Type.Object({
      workspace: PublicWorkspace,
      publicBaseUrl: Type.String({ maxLength: 2_048 }),
      path: Type.String({ maxLength: 2_048 }),
      data: SurfaceData,
    }),
    reply: RenderedSurface,
  },
});

/** What the plugin registry tells every replica. */
export const pluginRegistryBroadcasts = defineBroadcasts("plugin-registry", {
  "contributions.changed": {
    summary: "A plugin was installed, updated, (de)activated, assigned or uninstalled: contributions changed",
    payload: Type.Object({ pluginId: Type.String() }),
  },
});
