/**
 * The operator API's routing table (spec 5.4, 4.2, 4.3): every route once, with its method, path,
 * permission key, the NATS subject of the service that owns it, and its input/output schemas. The guard
 * (plugins/guard.ts) and the OpenAPI description (openapi.ts) are both derived from it.
 *
 * A route whose owning service does not serve its subject yet answers 503 (no responder), so the table is
 * complete now and routes light up as services implement them.
 *
 * Placement of functions the architecture leaves open (ADR 0003): media, custom fields, snippets, config,
 * surfaces, tenants and workspaces → resolver; notifications, users, roles, integrations → rbac; flows,
 * webhooks and the event catalogue → webhook-dispatcher; themes, plugins, entitlements → plugin-registry;
 * jobs and diagnostics → job-reaper.
 */
import { type TSchema, Type } from "@sinclair/typebox";
import type { CorePermissionKey } from "@svc/access";

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

export interface RouteSchemas {
  readonly params?: TSchema;
  readonly querystring?: TSchema;
  readonly body?: TSchema;
  /** Success response body, for the OpenAPI description. */
  readonly response?: TSchema;
}

export interface OperatorRoute {
  readonly method: HttpMethod;
  /** Fastify syntax: `/api/tenants/:tenantKey`. */
  readonly path: string;
  /**
   * The permission key. Two keys where the spec lists the route under both (members under membership.*
   * and workspace.*): either one passes, and a 403 names the first.
   */
  readonly permission: CorePermissionKey | readonly [CorePermissionKey, CorePermissionKey];
  /** Owning service's subject, without the deployment prefix. */
  readonly subject: string;
  /** Spec 5.3: user writes and the data export demand platform scope, even holding the key. */
  readonly platformOnly?: boolean;
  readonly summary: string;
  readonly schemas?: RouteSchemas;
}

const WorkspaceKey = Type.String({ pattern: "^[a-z0-9][a-z0-9-]{0,62}$" });
const Uuid = Type.String({ format: "uuid" });
const PermissionKeyString = Type.String({
  pattern: "^(\\*|[a-z0-9][a-z0-9-]*(\\.[a-z0-9][a-z0-9-]*)+)$",
  maxLength: 200,
});
const RoleName = Type.String({ pattern: "^[a-z][a-z0-9._-]{0,62}$" });

export const UserView = Type.Object({
  id: Uuid,
  userName: Type.String(),
  displayName: Type.String(),
  email: Type.Union([Type.String(), Type.Null()]),
  isActive: Type.Boolean(),
  role: Type.Union([Type.String(), Type.Null()]),
  createdAtUtc: Type.String(),
  updatedAtUtc: Type.String(),
});
export const RoleView = Type.Object({
  name: Type.String(),
  description: Type.String(),
  scope: Type.Union([Type.Literal("platform"), Type.Literal("workspace")]),
  permissions: Type.Array(Type.String()),
  source: Type.String(),
});
const Page = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), nextCursor: Type.Union([Type.String(), Type.Null()]) });
const PageQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

const SubscriptionView = Type.Object({
  id: Uuid,
  workspaceKey: Type.Union([Type.String(), Type.Null()]),
  eventName: Type.String(),
  targetUrl: Type.String(),
  isActive: Type.Boolean(),
  includeSensitiveData: Type.Boolean(),
  createdAtUtc: Type.String(),
  matchesKnownEvent: Type.Boolean(),
});

const r = (
  method: HttpMethod,
  path: string,
  permission: OperatorRoute["permission"],
  subject: string,
  summary: string,
  extra: Partial<Pick<OperatorRoute, "platformOnly" | "schemas">> = {},
): OperatorRoute => ({ method, path, permission, subject, summary, ...extra });

const wkParams = Type.Object({ workspaceKey: WorkspaceKey });
const wkUserParams = Type.Object({ workspaceKey: WorkspaceKey, userId: Uuid });
const userParams = Type.Object({ userId: Uuid });

export const OPERATOR_ROUTES: readonly OperatorRoute[] = [
  // Tenants (resolver)
  r("POST", "/api/tenants", "tenant.create", "resolver.tenants.create", "Create a tenant"),
  r("GET", "/api/tenants", "tenant.read", "resolver.tenants.list", "List tenants"),
  r("GET", "/api/tenants/:tenantKey", "tenant.read", "resolver.tenants.get", "Get a tenant"),
  r(
    "POST",
    "/api/tenants/:tenantKey/activate",
    "tenant.update",
    "resolver.tenants.activate",
    "Activate a tenant",
  ),
  r(
    "POST",
    "/api/tenants/:tenantKey/suspend",
    "tenant.update",
    "resolver.tenants.suspend",
    "Suspend a tenant",
  ),
  r("DELETE", "/api/tenants/:tenantKey", "tenant.delete", "resolver.tenants.delete", "Delete a tenant"),
  // Plugins (plugin-registry)
  r(
    "POST",
    "/api/plugins/install",
    "plugin.create",
    "plugin-registry.plugins.install",
    "Install a plugin package",
  ),
  r(
    "POST",
    "/api/plugins/install/local",
    "plugin.create",
    "plugin-registry.plugins.install-local",
    "Install a plugin from the host's disk",
  ),
  r(
    "POST",
    "/api/plugins/install/nuget",
    "plugin.create",
    "plugin-registry.plugins.install-feed",
    "Install a plugin from a package feed",
  ),
  r(
    "POST",
    "/api/plugins/:id/update/nuget",
    "plugin.create",
    "plugin-registry.plugins.update-feed",
    "Update a plugin from a package feed",
  ),
  r(
    "POST",
    "/api/plugins/:id/update/local",
    "plugin.create",
    "plugin-registry.plugins.update-local",
    "Update a plugin from the host's disk",
  ),
  r("GET", "/api/plugins", "plugin.read", "plugin-registry.plugins.list", "List plugins"),
  r(
    "GET",
    "/api/plugins/installed",
    "plugin.read",
    "plugin-registry.plugins.installed",
    "List installed plugins",
  ),
  r(
    "GET",
    "/api/plugins/signature-report",
    "plugin.read",
    "plugin-registry.plugins.signature-report",
    "Re-verify every installed plugin",
  ),
  r("GET", "/api/plugins/audit", "plugin.read", "plugin-registry.plugins.audit", "Plugin lifecycle audit"),
  r(
    "GET",
    "/api/plugins/contracts/support",
    "plugin.read",
    "plugin-registry.contracts.support",
    "Supported plugin contracts",
  ),
  r(
    "GET",
    "/api/plugins/contracts/compatibility",
    "plugin.read",
    "plugin-registry.contracts.compatibility",
    "Plugin contract compatibility",
  ),
  r(
    "GET",
    "/api/plugins/security/trusted-signers",
    "plugin.read",
    "plugin-registry.signers.list",
    "List trusted signers",
  ),
  r(
    "GET",
    "/api/workspaces/:workspaceKey/entitlements/:pluginId",
    "plugin.read",
    "plugin-registry.entitlements.workspace",
    "A workspace's entitlement to a plugin",
  ),
  r(
    "GET",
    "/api/tenants/:tenantId/entitlements/:pluginId",
    "plugin.read",
    "plugin-registry.entitlements.tenant",
    "A tenant's entitlement to a plugin",
  ),
  r("GET", "/api/entitlements", "plugin.read", "plugin-registry.entitlements.list", "List entitlements"),
  r("DELETE", "/api/plugins/:id", "plugin.delete", "plugin-registry.plugins.uninstall", "Uninstall a plugin"),
  r(
    "POST",
    "/api/plugins/:id/activate",
    "plugin.execute",
    "plugin-registry.plugins.activate",
    "Activate a plugin",
  ),
  r(
    "POST",
    "/api/plugins/:id/deactivate",
    "plugin.execute",
    "plugin-registry.plugins.deactivate",
    "Deactivate a plugin",
  ),
  r("PUT", "/api/entitlements", "plugin.execute", "plugin-registry.entitlements.put", "Set entitlements"),
  r(
    "POST",
    "/api/entitlements/sync",
    "plugin.execute",
    "plugin-registry.entitlements.sync",
    "Synchronise entitlements",
  ),
  r(
    "GET",
    "/api/workspaces/:workspaceKey/plugins",
    "plugin.assign",
    "plugin-registry.assignments.get",
    "A workspace's plugins",
  ),
  r(
    "PUT",
    "/api/workspaces/:workspaceKey/plugins",
    "plugin.assign",
    "plugin-registry.assignments.put",
    "Set a workspace's plugins",
  ),
  r(
    "GET",
    "/api/tenants/:tenantKey/plugins/delegations",
    "plugin.assign",
    "plugin-registry.delegations.list",
    "A tenant's plugin delegations",
  ),
  r(
    "PUT",
    "/api/tenants/:tenantKey/plugins/:pluginId/delegation",
    "plugin.assign",
    "plugin-registry.delegations.put",
    "Delegate a plugin to a tenant",
  ),
  // Configuration (resolver)
  r(
    "GET",
    "/api/config/definitions",
    "config.read",
    "resolver.config.definitions",
    "Configuration definitions",
  ),
  r("GET", "/api/config/effective", "config.read", "resolver.config.effective", "Effective configuration"),
  r("PUT", "/api/config/values", "config.update", "resolver.config.put", "Set configuration values"),
  // Webhooks and events (webhook-dispatcher)
  r(
    "GET",
    "/api/webhooks",
    "webhook.read",
    "webhook-dispatcher.webhooks.list",
    "List webhook subscriptions (newest first)",
    {
      schemas: {
        querystring: Type.Object(
          {
            workspaceKey: Type.Optional(Type.String({ maxLength: 63 })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
            cursor: Type.Optional(Type.String({ maxLength: 300 })),
          },
          { additionalProperties: false },
        ),
        response: Page(SubscriptionView),
      },
    },
  ),
  r(
    "POST",
    "/api/webhooks",
    "webhook.manage",
    "webhook-dispatcher.webhooks.create",
    "Create a webhook subscription",
    {
      schemas: {
        body: Type.Object(
          {},
          {
            additionalProperties: true,
            description: "eventName, targetUrl, secret (required); workspaceKey, includeSensitiveData",
          },
        ),
        response: SubscriptionView,
      },
    },
  ),
  r(
    "PUT",
    "/api/webhooks/:id/activation",
    "webhook.manage",
    "webhook-dispatcher.webhooks.activation",
    "Enable or disable a subscription",
    {
      schemas: {
        params: Type.Object({ id: Uuid }),
        querystring: Type.Object({ isActive: Type.Boolean() }, { additionalProperties: false }),
        response: SubscriptionView,
      },
    },
  ),
  r(
    "DELETE",
    "/api/webhooks/:id",
    "webhook.manage",
    "webhook-dispatcher.webhooks.delete",
    "Delete a subscription",
    {
      schemas: { params: Type.Object({ id: Uuid }) },
    },
  ),
  r("GET", "/api/events/catalog", "flow.read", "webhook-dispatcher.events.catalog", "The event catalogue"),
  // Notifications (rbac)
  r("GET", "/api/notifications", "notification.read", "rbac.notifications.list", "List notifications"),
  r(
    "PUT",
    "/api/notifications/:id/read",
    "notification.read",
    "rbac.notifications.read",
    "Mark a notification read",
  ),
  // Media, custom fields (resolver)
  r("GET", "/api/media", "media.read", "resolver.media.list", "List media"),
  r("GET", "/api/media/:id/content", "media.read", "resolver.media.content", "Media content"),
  r("POST", "/api/media", "media.manage", "resolver.media.upload", "Upload media"),
  r("DELETE", "/api/media/:id", "media.manage", "resolver.media.delete", "Delete media"),
  r(
    "GET",
    "/api/custom-fields/definitions",
    "customfield.read",
    "resolver.custom-fields.definitions",
    "Custom field definitions",
  ),
  r(
    "GET",
    "/api/custom-fields/:entityName/:entityId",
    "customfield.read",
    "resolver.custom-fields.get",
    "An entity's custom fields",
  ),
  r(
    "PUT",
    "/api/custom-fields/:entityName/:entityId",
    "customfield.update",
    "resolver.custom-fields.put",
    "Set an entity's custom fields",
  ),
  // Flows (webhook-dispatcher)
  r("GET", "/api/flows", "flow.read", "webhook-dispatcher.flows.list", "List flows"),
  r("POST", "/api/flows", "flow.manage", "webhook-dispatcher.flows.create", "Create a flow"),
  r("PUT", "/api/flows/:id", "flow.manage", "webhook-dispatcher.flows.put", "Update a flow"),
  r("DELETE", "/api/flows/:id", "flow.manage", "webhook-dispatcher.flows.delete", "Delete a flow"),
  // Jobs and diagnostics (job-reaper)
  r("GET", "/api/jobs", "job.read", "job-reaper.jobs.route", "List background jobs (dead letters included)", {
    schemas: {
      querystring: Type.Object(
        {
          status: Type.Optional(
            Type.Union(["Pending", "Running", "Succeeded", "Failed"].map((s) => Type.Literal(s))),
          ),
          type: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
          workspaceKey: Type.Optional(Type.String({ maxLength: 63 })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
          cursor: Type.Optional(Type.String({ maxLength: 200 })),
        },
        { additionalProperties: false },
      ),
      response: Page(Type.Object({}, { additionalProperties: true })),
    },
  }),
  r(
    "POST",
    "/api/diagnostics/recorder/start",
    "diagnostics.record",
    "job-reaper.diagnostics.start",
    "Start the diagnostics recorder",
  ),
  r(
    "POST",
    "/api/diagnostics/recorder/stop",
    "diagnostics.record",
    "job-reaper.diagnostics.stop",
    "Stop the diagnostics recorder",
  ),
  r(
    "GET",
    "/api/diagnostics/recorder",
    "diagnostics.record",
    "job-reaper.diagnostics.get",
    "The diagnostics recording",
  ),
  // Themes (plugin-registry)
  r(
    "GET",
    "/api/themes/definitions",
    "extension.read",
    "plugin-registry.themes.definitions",
    "Theme template definitions",
  ),
  r(
    "GET",
    "/api/themes/workspaces/:workspaceKey",
    "extension.read",
    "plugin-registry.themes.workspace",
    "A workspace's theme",
  ),
  r(
    "GET",
    "/api/themes/workspaces/:workspaceKey/effective",
    "extension.read",
    "plugin-registry.themes.effective",
    "A workspace's effective templates",
  ),
  r(
    "GET",
    "/api/themes/workspaces/:workspaceKey/settings",
    "extension.read",
    "plugin-registry.themes.settings",
    "A workspace's theme settings",
  ),
  r(
    "GET",
    "/workspace/themes/effective",
    "extension.read",
    "plugin-registry.themes.effective-current",
    "The caller's workspace's effective templates",
  ),
  r(
    "PUT",
    "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version",
    "extension.update",
    "plugin-registry.themes.definition-put",
    "Register a template definition",
  ),
  r(
    "PUT",
    "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version/activation",
    "extension.update",
    "plugin-registry.themes.definition-activation",
    "Activate a template definition",
  ),
  r(
    "PUT",
    "/api/themes/workspaces/:workspaceKey",
    "extension.update",
    "plugin-registry.themes.workspace-put",
    "Set a workspace's theme",
  ),
  r(
    "DELETE",
    "/api/themes/workspaces/:workspaceKey",
    "extension.update",
    "plugin-registry.themes.workspace-delete",
    "Remove a workspace's theme",
  ),
  r(
    "PUT",
    "/api/themes/workspaces/:workspaceKey/settings",
    "extension.update",
    "plugin-registry.themes.settings-put",
    "Set a workspace's theme settings",
  ),
  // Roles (rbac)
  r("GET", "/api/rbac/roles", "role.read", "rbac.roles.list", "List roles", {
    platformOnly: true,
    schemas: { response: Type.Array(RoleView) },
  }),
  r("GET", "/api/rbac/permissions", "role.read", "rbac.permissions.list", "List permission keys", {
    platformOnly: true,
    schemas: { response: Type.Array(Type.Object({ key: Type.String(), source: Type.String() })) },
  }),
  r(
    "GET",
    "/api/rbac/users",
    "role.read",
    "rbac.role-assignments.list",
    "List users' global role assignments",
    {
      platformOnly: true,
      schemas: {
        querystring: PageQuery,
        response: Page(
          Type.Object({
            userId: Uuid,
            userName: Type.String(),
            role: Type.Union([Type.String(), Type.Null()]),
          }),
        ),
      },
    },
  ),
  r(
    "PUT",
    "/api/rbac/roles/:role",
    "role.update",
    "rbac.roles.put",
    "Create or replace a role (revokes its holders' sessions)",
    {
      platformOnly: true,
      schemas: {
        params: Type.Object({ role: RoleName }),
        body: Type.Object(
          {
            permissions: Type.Array(PermissionKeyString, { maxItems: 500, uniqueItems: true }),
            description: Type.Optional(Type.String({ maxLength: 500 })),
            scope: Type.Optional(Type.Union([Type.Literal("platform"), Type.Literal("workspace")])),
          },
          { additionalProperties: false },
        ),
        response: RoleView,
      },
    },
  ),
  r(
    "DELETE",
    "/api/rbac/roles/:role",
    "role.update",
    "rbac.roles.delete",
    "Delete a role (revokes its holders' sessions)",
    {
      platformOnly: true,
      schemas: { params: Type.Object({ role: RoleName }) },
    },
  ),
  r(
    "PUT",
    "/api/rbac/users/:userId",
    "role.update",
    "rbac.role-assignments.put",
    "Set a user's global role",
    {
      platformOnly: true,
      schemas: { params: userParams, body: Type.Object({ role: RoleName }, { additionalProperties: false }) },
    },
  ),
  r(
    "DELETE",
    "/api/rbac/users/:userId",
    "role.update",
    "rbac.role-assignments.delete",
    "Remove a user's global role",
    {
      platformOnly: true,
      schemas: { params: userParams },
    },
  ),
  // Users (rbac)
  r("POST", "/api/users", "user.create", "rbac.users.create", "Create a user", {
    platformOnly: true,
    schemas: {
      body: Type.Object(
        {
          userName: Type.String({ pattern: "^[A-Za-z0-9._@+-]{1,100}$" }),
          password: Type.String({ minLength: 12, maxLength: 200 }),
          displayName: Type.Optional(Type.String({ maxLength: 200 })),
          email: Type.Optional(Type.Union([Type.String({ format: "email", maxLength: 320 }), Type.Null()])),
        },
        { additionalProperties: false },
      ),
      response: UserView,
    },
  }),
  r(
    "GET",
    "/api/users",
    "user.read",
    "rbac.users.list",
    "List users (a workspace session sees its members)",
    {
      schemas: { querystring: PageQuery, response: Page(UserView) },
    },
  ),
  r("GET", "/api/users/:userId", "user.read", "rbac.users.get", "Get a user (workspace-filtered)", {
    schemas: { params: userParams, response: UserView },
  }),
  r(
    "GET",
    "/api/users/:userId/data-export",
    "user.read",
    "rbac.users.export",
    "Export everything stored about a user",
    {
      platformOnly: true,
      schemas: { params: userParams },
    },
  ),
  r("PUT", "/api/users/:userId", "user.update", "rbac.users.update", "Update a user", {
    platformOnly: true,
    schemas: {
      params: userParams,
      body: Type.Object(
        {
          displayName: Type.Optional(Type.String({ maxLength: 200 })),
          email: Type.Optional(Type.Union([Type.String({ format: "email", maxLength: 320 }), Type.Null()])),
          password: Type.Optional(Type.String({ minLength: 12, maxLength: 200 })),
        },
        { additionalProperties: false },
      ),
      response: UserView,
    },
  }),
  r(
    "PUT",
    "/api/users/:userId/activation",
    "user.update",
    "rbac.users.activation",
    "Activate or deactivate a user",
    {
      platformOnly: true,
      schemas: {
        params: userParams,
        querystring: Type.Object({ isActive: Type.Boolean() }, { additionalProperties: false }),
        response: UserView,
      },
    },
  ),
  r("DELETE", "/api/users/:userId", "user.delete", "rbac.users.delete", "Delete a user", {
    platformOnly: true,
    schemas: { params: userParams },
  }),
  // Memberships (rbac)
  r(
    "GET",
    "/api/workspaces/:workspaceKey/members",
    ["membership.read", "workspace.read"],
    "rbac.members.list",
    "List a workspace's members",
    {
      schemas: { params: wkParams, querystring: PageQuery },
    },
  ),
  r(
    "PUT",
    "/api/workspaces/:workspaceKey/members/:userId",
    ["membership.update", "workspace.update"],
    "rbac.members.put",
    "Add a member",
    {
      schemas: { params: wkUserParams },
    },
  ),
  r(
    "DELETE",
    "/api/workspaces/:workspaceKey/members/:userId",
    ["membership.delete", "workspace.update"],
    "rbac.members.delete",
    "Remove a member",
    {
      schemas: { params: wkUserParams },
    },
  ),
  r(
    "GET",
    "/api/workspaces/:workspaceKey/members/:userId/roles",
    "membership.read",
    "rbac.member-roles.get",
    "A member's roles",
    {
      schemas: {
        params: wkUserParams,
        response: Type.Object({ userId: Uuid, roles: Type.Array(Type.String()) }),
      },
    },
  ),
  r(
    "PUT",
    "/api/workspaces/:workspaceKey/members/:userId/roles",
    "membership.update",
    "rbac.member-roles.put",
    "Replace a member's roles",
    {
      schemas: {
        params: wkUserParams,
        body: Type.Object(
          { roles: Type.Array(RoleName, { maxItems: 50, uniqueItems: true }) },
          { additionalProperties: false },
        ),
        response: Type.Object({ userId: Uuid, roles: Type.Array(Type.String()) }),
      },
    },
  ),
  // Workspaces and surfaces (resolver)
  r("GET", "/api/workspaces", "workspace.read", "resolver.workspaces.list", "List workspaces"),
  r("GET", "/api/workspaces/:workspaceKey", "workspace.read", "resolver.workspaces.get", "Get a workspace", {
    schemas: { params: wkParams },
  }),
  r(
    "PUT",
    "/api/workspaces/:workspaceKey",
    "workspace.update",
    "resolver.workspaces.put",
    "Create or update a workspace",
    { schemas: { params: wkParams } },
  ),
  r(
    "DELETE",
    "/api/workspaces/:workspaceKey",
    "workspace.delete",
    "resolver.workspaces.delete",
    "Delete a workspace",
    { schemas: { params: wkParams } },
  ),
  r("GET", "/api/surfaces", "workspace.read", "resolver.surfaces.list", "List surfaces"),
  r("GET", "/api/surfaces/:surfaceKey", "workspace.read", "resolver.surfaces.get", "Get a surface"),
  r(
    "PUT",
    "/api/surfaces/:surfaceKey",
    "workspace.update",
    "resolver.surfaces.put",
    "Create or update a surface",
  ),
  r(
    "DELETE",
    "/api/surfaces/:surfaceKey",
    "workspace.update",
    "resolver.surfaces.delete",
    "Delete a surface",
  ),
  // Integrations and the key catalogue (rbac)
  r(
    "GET",
    "/api/security/integrations",
    "integration.read",
    "rbac.integrations.list",
    "List integrations (API clients)",
  ),
  r(
    "POST",
    "/api/security/integrations",
    "integration.manage",
    "rbac.integrations.create",
    "Create an integration; its secret is shown once",
    {
      schemas: {
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 200 }),
            workspaceKey: Type.Optional(Type.Union([WorkspaceKey, Type.Null()])),
            permissions: Type.Optional(Type.Array(PermissionKeyString, { maxItems: 200, uniqueItems: true })),
          },
          { additionalProperties: false },
        ),
      },
    },
  ),
  r(
    "DELETE",
    "/api/security/integrations/:id",
    "integration.manage",
    "rbac.integrations.delete",
    "Delete an integration",
    {
      schemas: { params: Type.Object({ id: Uuid }) },
    },
  ),
  r(
    "GET",
    "/api/security/rbac/permissions",
    "role.read",
    "rbac.permissions.list",
    "Every permission key, plugin-declared ones included",
    { platformOnly: true },
  ),
  // Snippets (resolver)
  r("GET", "/api/snippets", "snippet.read", "resolver.snippets.list", "List snippets"),
  r(
    "PUT",
    "/api/snippets/:snippetKey",
    "snippet.update",
    "resolver.snippets.put",
    "Create or update a snippet",
  ),
  r("DELETE", "/api/snippets/:snippetKey", "snippet.update", "resolver.snippets.delete", "Delete a snippet"),
];
