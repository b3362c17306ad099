/**
 * Routes the resolver owns (ADR 0003): tenants, workspaces, surfaces, custom fields and snippets. It also
 * serves the configuration (./config.ts) and media (./media.ts) routes, declared beside it (ADR 0015).
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { MAX_HOST_LENGTH, MAX_PATH_LENGTH } from "@svc/workspace";

import { FieldValuesBody, Nullable, Page, pageFields, TenantKey, wkParams, WorkspaceKey } from "./common.js";
import { defineBroadcasts, defineMessages } from "./messages.js";
import { defineRoutes } from "./route.js";

const SurfaceKey = Type.String({ pattern: "^[a-z0-9][a-z0-9-]{0,62}$" });
const SnippetKey = Type.String({ pattern: "^[a-z0-9][a-z0-9_-]{0,62}$" });
/** Which workspace a surface or snippet route means: a workspace session's own, else this (default `default`). */
export const WorkspaceQuery = Type.Object(
  { workspaceKey: Type.Optional(Type.String({ maxLength: 63 })) },
  { additionalProperties: false },
);

export const TenantView = Type.Object({
  tenantKey: Type.String(),
  name: Type.String(),
  /** `active`, or `suspended` (its workspaces are invisible on every public route). */
  state: Type.Union([Type.Literal("active"), Type.Literal("suspended")]),
  isActive: Type.Boolean(),
  workspaceCount: Type.Integer(),
  createdAtUtc: Type.String(),
  updatedAtUtc: Type.String(),
});

/** A host name as a binding takes it (no port; normalised to lower case by the resolver). */
const HostName = Type.String({ minLength: 1, maxLength: 253, pattern: "^[A-Za-z0-9.-]+$" });

export const TenantHostView = Type.Object({
  host: Type.String(),
  tenantKey: Type.String(),
  createdAtUtc: Type.String(),
});

const Binding = Type.Object(
  {
    host: Type.String({ minLength: 1, maxLength: 253 }),
    pathPrefix: Type.Optional(Type.String({ pattern: "^/", maxLength: 200 })),
  },
  { additionalProperties: false },
);

export const WorkspaceView = Type.Object({
  workspaceKey: Type.String(),
  tenantKey: Type.String(),
  name: Type.String(),
  type: Type.String(),
  isActive: Type.Boolean(),
  accessPolicy: Type.Union([Type.Literal("Public"), Type.Literal("Authenticated")]),
  bindings: Type.Array(Type.Object({ host: Type.String(), pathPrefix: Type.String() })),
  publicBaseUrl: Nullable(Type.String()),
  createdAtUtc: Type.String(),
  updatedAtUtc: Type.String(),
});

/** A navigation item: `path` is its segment under its parent (the root's is the application's base path). */
export interface NavItem {
  key: string;
  title: string;
  path: string;
  visible?: boolean;
  order?: number;
  children?: NavItem[];
}
/** Navigation items nest up to five levels (a schema without self-reference, for every validator). */
function navItem(depth: number): TSchema {
  return Type.Object(
    {
      key: Type.String({ pattern: "^[A-Za-z0-9_.-]{1,100}$" }),
      title: Type.String({ minLength: 1, maxLength: 200 }),
      path: Type.String({ pattern: "^[A-Za-z0-9._~-]{0,100}$" }),
      visible: Type.Optional(Type.Boolean()),
      order: Type.Optional(Type.Integer({ minimum: -1_000_000, maximum: 1_000_000 })),
      ...(depth > 1 ? { children: Type.Optional(Type.Array(navItem(depth - 1), { maxItems: 100 })) } : {}),
    },
    { additionalProperties: false },
  );
}
const NavItemSchema = navItem(5);

const SurfaceView = Type.Object({
  workspaceKey: Type.String(),
  surfaceKey: Type.String(),
  name: Type.String(),
  applicationRoot: Type.Unknown(),
  updatedAtUtc: Type.String(),
});

/** `user`, `workspace`, `tenant`, or an entity a plugin names in its namespace (`crm.contact`). */
const EntityName = Type.String({
  pattern: "^(user|workspace|tenant|[a-z][a-z0-9-]{1,62}\\.[a-z][a-z0-9-]{0,62})$",
});
export const CustomFieldDefinition = Type.Object({
  entityName: Type.String(),
  key: Type.String(),
  label: Type.String(),
  type: Type.String(),
  required: Type.Boolean(),
  options: Type.Array(Type.String()),
  description: Nullable(Type.String()),
  pluginId: Type.String(),
});
const CustomFieldParams = Type.Object({
  entityName: EntityName,
  entityId: Type.String({ pattern: "^[A-Za-z0-9_.:-]{1,200}$" }),
});
const CustomFieldValues = Type.Object({
  entityName: Type.String(),
  entityId: Type.String(),
  values: Type.Record(Type.String(), Type.String()),
  fields: Type.Array(CustomFieldDefinition),
});

const SnippetView = Type.Object({
  workspaceKey: Type.String(),
  snippetKey: Type.String(),
  content: Type.String(),
  contentType: Type.Union([Type.Literal("text/plain"), Type.Literal("text/html")]),
  updatedAtUtc: Type.String(),
});

export const resolverRoutes = defineRoutes("resolver", {
  "tenants.create": {
    method: "POST",
    path: "/api/tenants",
    permission: "tenant.create",
    platformOnly: true,
    summary: "Create a tenant (active)",
    body: Type.Object(
      { tenantKey: TenantKey, name: Type.String({ minLength: 1, maxLength: 200 }) },
      { additionalProperties: false },
    ),
    reply: TenantView,
  },
  "tenants.list": {
    method: "GET",
    path: "/api/tenants",
    permission: "tenant.read",
    platformOnly: true,
    summary: "List tenants",
    query: Type.Object(pageFields, { additionalProperties: false }),
    reply: Page(TenantView),
  },
  "tenants.get": {
    method: "GET",
    path: "/api/tenants/:tenantKey",
    permission: "tenant.read",
    platformOnly: true,
    summary: "Get a tenant",
    params: Type.Object({ tenantKey: TenantKey }),
    reply: TenantView,
  },
  "tenants.activate": {
    method: "POST",
    path: "/api/tenants/:tenantKey/activate",
    permission: "tenant.update",
    platformOnly: true,
    summary: "Activate a tenant: its active workspaces become visible again",
    params: Type.Object({ tenantKey: TenantKey }),
    reply: TenantView,
  },
  "tenants.suspend": {
    method: "POST",
    path: "/api/tenants/:tenantKey/suspend",
    permission: "tenant.update",
    platformOnly: true,
    summary: "Suspend a tenant: every public route hides its workspaces within a second",
    params: Type.Object({ tenantKey: TenantKey }),
    reply: TenantView,
  },
  "tenants.delete": {
    method: "DELETE",
    path: "/api/tenants/:tenantKey",
    permission: "tenant.delete",
    platformOnly: true,
    summary: "Delete a tenant; one with workspaces only with deleteWorkspaces=true (they are deleted too)",
    params: Type.Object({ tenantKey: TenantKey }),
    query: Type.Object({ deleteWorkspaces: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
  },
  "tenant-hosts.list": {
    method: "GET",
    path: "/api/tenants/:tenantKey/hosts",
    permission: "tenant.read",
    platformOnly: true,
    summary: "The hosts assigned to a tenant: only its workspaces may bind paths under them",
    params: Type.Object({ tenantKey: TenantKey }),
    reply: Type.Object({ tenantKey: Type.String(), items: Type.Array(TenantHostView) }),
  },
  "tenant-hosts.put": {
    method: "PUT",
    path: "/api/tenants/:tenantKey/hosts/:host",
    permission: "tenant.update",
    platformOnly: true,
    summary: "Assign a host to a tenant (201; 200 when it has it already; 409 when another tenant has it)",
    params: Type.Object({ tenantKey: TenantKey, host: HostName }),
    reply: TenantHostView,
  },
  "tenant-hosts.delete": {
    method: "DELETE",
    path: "/api/tenants/:tenantKey/hosts/:host",
    permission: "tenant.update",
    platformOnly: true,
    summary: "Take a host back from a tenant (409 while one of its workspaces binds it)",
    params: Type.Object({ tenantKey: TenantKey, host: HostName }),
  },
  "custom-fields.definitions": {
    method: "GET",
    path: "/api/custom-fields/definitions",
    permission: "customfield.read",
    summary: "The custom fields installed plugins define, per entity type",
    query: Type.Object({ entityName: Type.Optional(EntityName) }, { additionalProperties: false }),
    reply: Type.Object({ items: Type.Array(CustomFieldDefinition) }),
  },
  "custom-fields.get": {
    method: "GET",
    path: "/api/custom-fields/:entityName/:entityId",
    permission: "customfield.read",
    summary: "An entity's custom field values, with the definitions",
    params: CustomFieldParams,
    reply: CustomFieldValues,
  },
  "custom-fields.put": {
    method: "PUT",
    path: "/api/custom-fields/:entityName/:entityId",
    permission: "customfield.update",
    summary: "Set an entity's custom field values (checked against the definitions; null removes one)",
    params: CustomFieldParams,
    body: FieldValuesBody,
    reply: CustomFieldValues,
  },
  "workspaces.list": {
    method: "GET",
    path: "/api/workspaces",
    permission: "workspace.read",
    summary: "List workspaces (a workspace session sees its own)",
    query: Type.Object(
      { tenantKey: Type.Optional(TenantKey), workspaceKey: Type.Optional(WorkspaceKey), ...pageFields },
      { additionalProperties: false },
    ),
    reply: Page(WorkspaceView),
  },
  "workspaces.get": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey",
    permission: "workspace.read",
    summary: "Get a workspace",
    params: wkParams,
    reply: WorkspaceView,
  },
  "workspaces.put": {
    method: "PUT",
    path: "/api/workspaces/:workspaceKey",
    permission: "workspace.update",
    summary: "Create (201, platform sessions) or replace (200) a workspace",
    params: wkParams,
    body: Type.Object(
      {
        tenantKey: TenantKey,
        name: Type.String({ minLength: 1, maxLength: 200 }),
        type: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9_.-]{1,50}$" })),
        isActive: Type.Optional(
          Type.Boolean({
            description:
              "Platform sessions only (a workspace session changing it gets 403, rule platform-only-field). Omitted: true for a new workspace, unchanged for an existing one. An inactive workspace refuses sign-in and every request of its sessions.",
          }),
        ),
        accessPolicy: Type.Optional(Type.Union([Type.Literal("Public"), Type.Literal("Authenticated")])),
        bindings: Type.Optional(Type.Array(Binding, { maxItems: 50 })),
        publicBaseUrl: Type.Optional(Nullable(Type.String({ format: "uri", maxLength: 500 }))),
      },
      { additionalProperties: false },
    ),
    reply: WorkspaceView,
  },
  "workspaces.delete": {
    method: "DELETE",
    path: "/api/workspaces/:workspaceKey",
    permission: "workspace.delete",
    summary: "Delete a workspace (its surfaces, snippets and bindings with it)",
    params: wkParams,
  },
  "surfaces.list": {
    method: "GET",
    path: "/api/surfaces",
    permission: "workspace.read",
    summary: "A workspace's surfaces",
    query: WorkspaceQuery,
    reply: Type.Object({ items: Type.Array(SurfaceView) }),
  },
  "surfaces.get": {
    method: "GET",
    path: "/api/surfaces/:surfaceKey",
    permission: "workspace.read",
    summary: "A surface with its navigation tree",
    params: Type.Object({ surfaceKey: SurfaceKey }),
    query: WorkspaceQuery,
    reply: SurfaceView,
  },
  "surfaces.put": {
    method: "PUT",
    path: "/api/surfaces/:surfaceKey",
    permission: "workspace.update",
    summary: "Create (201) or replace (200) a surface: its application root and navigation tree",
    params: Type.Object({ surfaceKey: SurfaceKey }),
    query: WorkspaceQuery,
    body: Type.Object(
      { name: Type.String({ minLength: 1, maxLength: 200 }), applicationRoot: NavItemSchema },
      { additionalProperties: false },
    ),
    reply: SurfaceView,
  },
  "surfaces.delete": {
    method: "DELETE",
    path: "/api/surfaces/:surfaceKey",
    permission: "workspace.update",
    summary: "Delete a surface",
    params: Type.Object({ surfaceKey: SurfaceKey }),
    query: WorkspaceQuery,
  },
  "snippets.list": {
    method: "GET",
    path: "/api/snippets",
    permission: "snippet.read",
    summary: "A workspace's snippets",
    query: WorkspaceQuery,
    reply: Type.Object({ items: Type.Array(SnippetView) }),
  },
  "snippets.put": {
    method: "PUT",
    path: "/api/snippets/:snippetKey",
    permission: "snippet.update",
    summary: "Create (201) or replace (200) a snippet, usable in surface templates as snippets.<key>",
    params: Type.Object({ snippetKey: SnippetKey }),
    query: WorkspaceQuery,
    body: Type.Object(
      {
        content: Type.String({ maxLength: 65_536 }),
        contentType: Type.Optional(Type.Union([Type.Literal("text/plain"), Type.Literal("text/html")])),
      },
      { additionalProperties: false },
    ),
    reply: SnippetView,
  },
  "snippets.delete": {
    method: "DELETE",
    path: "/api/snippets/:snippetKey",
    permission: "snippet.update",
    summary: "Delete a snippet",
    params: Type.Object({ snippetKey: SnippetKey }),
    query: WorkspaceQuery,
  },
});

/** Input of workspace resolution: the public host (no port) and a normalised path. */
export const ResolveRequest = Type.Object({
  host: Type.String({ maxLength: MAX_HOST_LENGTH }),
  path: Type.String({ maxLength: MAX_PATH_LENGTH }),
});
export type ResolveRequest = Static<typeof ResolveRequest>;

/** What workspace resolution answers: the visible workspace, if any. */
export const ResolveResult = Type.Object({ resolved: Type.Boolean(), workspaceKey: Nullable(Type.String()) });
export type ResolveResult = Static<typeof ResolveResult>;

/** A workspace key as the public routes receive it (an unknown one is answered as not visible). */
const PublicKey = Type.String({ maxLength: 63 });
/** A public path prefix: `/` and at most 199 more characters, no white space. */
const PathPrefix = Type.String({ pattern: "^/[^\\s]{0,199}$" });

/** Which of the named workspaces and tenants exist, and each workspace's tenant (for entitlements). */
export const TenancyLookupRequest = Type.Object({
  workspaceKeys: Type.Array(Type.String({ maxLength: 63 }), { maxItems: 500 }),
  tenantKeys: Type.Array(Type.String({ maxLength: 63 }), { maxItems: 500 }),
});
export type TenancyLookupRequest = Static<typeof TenancyLookupRequest>;
export const TenancyLookupReply = Type.Object({
  workspaces: Type.Array(
    Type.Object({
      workspaceKey: Type.String(),
      tenantKey: Type.String(),
      /** The workspace's own `isActive` (an operator's decision). */
      isActive: Type.Boolean(),
      /** false while the workspace's tenant is suspended. */
      tenantIsActive: Type.Boolean(),
    }),
  ),
  tenants: Type.Array(Type.String()),
});
export type TenancyLookupReply = Static<typeof TenancyLookupReply>;

/** A visible workspace as the public routes show it: the workspace, its access policy and route. */
export const PublicWorkspace = Type.Object({
  workspace: Type.Object({ key: Type.String(), name: Type.String(), type: Type.String() }),
  accessPolicy: Type.Union([Type.Literal("Public"), Type.Literal("Authenticated")]),
  tenantKey: Type.String(),
  route: Type.Object({
    /** The workspace's configured public base URL; null when it has none (the gateway derives one). */
    publicBaseUrl: Nullable(Type.String()),
    publicHost: Type.String(),
    publicPathPrefix: Type.String(),
  }),
});
export type PublicWorkspace = Static<typeof PublicWorkspace>;

/** By key (a workspaceKey query value), or by host and path (as resolution). */
export const PublicWorkspaceRequest = Type.Union([Type.Object({ workspaceKey: PublicKey }), ResolveRequest]);
export type PublicWorkspaceRequest = Static<typeof PublicWorkspaceRequest>;

const NavigationItem = Type.Object({
  key: Type.String(),
  title: Type.String(),
  path: Type.String(),
  fullPath: Type.String(),
  order: Type.Number(),
  hasChildren: Type.Boolean(),
});

/** A surface's navigation: the children of the surface's application root, each with its full path. */
export const NavigationView = Type.Object({
  workspaceKey: Type.String(),
  surfaceKey: Type.String(),
  items: Type.Array(NavigationItem),
});
export type NavigationView = Static<typeof NavigationView>;

/** What a server-side render of a workspace's surface needs besides the chain and theme (the resolver's). */
export const SurfaceData = Type.Object({
  navigation: Type.Array(NavigationItem),
  snippets: Type.Record(Type.String(), Type.Object({ content: Type.String(), contentType: Type.String() })),
});
export type SurfaceData = Static<typeof SurfaceData>;

/** What the resolver answers to the other services. */
export const resolverMessages = defineMessages("resolver", {
  "workspace.resolve": {
    summary: "Resolves the visible workspace for a host and path",
    request: ResolveRequest,
    reply: ResolveResult,
  },
  "workspace.public": {
    summary: "A visible workspace for the public routes, or null",
    request: PublicWorkspaceRequest,
    reply: Nullable(PublicWorkspace),
  },
  "navigation.get": {
    summary: "A visible workspace's navigation, or null when the workspace or surface is not found",
    request: Type.Object({
      workspaceKey: PublicKey,
      surfaceKey: Type.String({ maxLength: 63 }),
      parentKey: Type.Optional(Type.String({ maxLength: 100 })),
      pathPrefix: Type.Optional(PathPrefix),
    }),
    reply: Nullable(NavigationView),
  },
  "surface.data": {
    summary: "A visible workspace's default surface navigation and its snippets, for rendering",
    request: Type.Object({ workspaceKey: PublicKey, pathPrefix: PathPrefix }),
    reply: SurfaceData,
  },
  "tenancy.lookup": {
    summary: "The named workspaces (with their tenant) and tenants that exist (at most 500 of each)",
    request: TenancyLookupRequest,
    reply: TenancyLookupReply,
  },
});

/** What the resolver tells every replica. */
export const resolverBroadcasts = defineBroadcasts("resolver", {
  "cache.invalidate": {
    summary: "Tenants, workspaces or bindings changed: drop cached resolutions",
    payload: Type.Object({ reason: Type.String() }),
  },
});
