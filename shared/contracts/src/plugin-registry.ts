/**
 * Routes the plugin registry owns (ADR 0003): plugins, trusted signers, entitlements, workspace plugin
 * assignments and themes. Routes it does not serve yet answer 503.
 */
import { Type } from "@sinclair/typebox";

import { Nullable, Page, PageQuery } from "./common.js";
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
  /** `refused` when the stored package failed verification at the registry's last start (spec 5.7.4). */
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
  action: Type.String(),
  pluginId: Nullable(Type.String()),
  version: Nullable(Type.String()),
  outcome: Type.Union([Type.Literal("succeeded"), Type.Literal("failed")]),
  reason: Nullable(Type.String()),
});

export const pluginRegistryRoutes = defineRoutes("plugin-registry", {
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
    summary: "Plugin lifecycle audit",
    query: PageQuery,
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
    summary: "A workspace's entitlement to a plugin",
  },
  "entitlements.tenant": {
    method: "GET",
    path: "/api/tenants/:tenantId/entitlements/:pluginId",
    permission: "plugin.read",
    summary: "A tenant's entitlement to a plugin",
  },
  "entitlements.list": {
    method: "GET",
    path: "/api/entitlements",
    permission: "plugin.read",
    summary: "List entitlements",
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
    summary: "Activate a plugin",
  },
  "plugins.deactivate": {
    method: "POST",
    path: "/api/plugins/:id/deactivate",
    permission: "plugin.execute",
    summary: "Deactivate a plugin",
  },
  "entitlements.put": {
    method: "PUT",
    path: "/api/entitlements",
    permission: "plugin.execute",
    summary: "Set entitlements",
  },
  "entitlements.sync": {
    method: "POST",
    path: "/api/entitlements/sync",
    permission: "plugin.execute",
    summary: "Synchronise entitlements",
  },
  "assignments.get": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey/plugins",
    permission: "plugin.assign",
    summary: "A workspace's plugins",
  },
  "assignments.put": {
    method: "PUT",
    path: "/api/workspaces/:workspaceKey/plugins",
    permission: "plugin.assign",
    summary: "Set a workspace's plugins",
  },
  "delegations.list": {
    method: "GET",
    path: "/api/tenants/:tenantKey/plugins/delegations",
    permission: "plugin.assign",
    summary: "A tenant's plugin delegations",
  },
  "delegations.put": {
    method: "PUT",
    path: "/api/tenants/:tenantKey/plugins/:pluginId/delegation",
    permission: "plugin.assign",
    summary: "Delegate a plugin to a tenant",
  },
  "themes.definitions": {
    method: "GET",
    path: "/api/themes/definitions",
    permission: "extension.read",
    summary: "Theme template definitions",
  },
  "themes.workspace": {
    method: "GET",
    path: "/api/themes/workspaces/:workspaceKey",
    permission: "extension.read",
    summary: "A workspace's theme",
  },
  "themes.effective": {
    method: "GET",
    path: "/api/themes/workspaces/:workspaceKey/effective",
    permission: "extension.read",
    summary: "A workspace's effective templates",
  },
  "themes.settings": {
    method: "GET",
    path: "/api/themes/workspaces/:workspaceKey/settings",
    permission: "extension.read",
    summary: "A workspace's theme settings",
  },
  "themes.effective-current": {
    method: "GET",
    path: "/workspace/themes/effective",
    permission: "extension.read",
    summary: "The caller's workspace's effective templates",
  },
  "themes.definition-put": {
    method: "PUT",
    path: "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version",
    permission: "extension.update",
    summary: "Register a template definition",
  },
  "themes.definition-activation": {
    method: "PUT",
    path: "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version/activation",
    permission: "extension.update",
    summary: "Activate a template definition",
  },
  "themes.workspace-put": {
    method: "PUT",
    path: "/api/themes/workspaces/:workspaceKey",
    permission: "extension.update",
    summary: "Set a workspace's theme",
  },
  "themes.workspace-delete": {
    method: "DELETE",
    path: "/api/themes/workspaces/:workspaceKey",
    permission: "extension.update",
    summary: "Remove a workspace's theme",
  },
  "themes.settings-put": {
    method: "PUT",
    path: "/api/themes/workspaces/:workspaceKey/settings",
    permission: "extension.update",
    summary: "Set a workspace's theme settings",
  },
});
