/**
 * The request/reply subjects and broadcasts that are not operator routes, declared by module augmentation
 * of the bus's maps (the bus itself knows no service's data types): rbac's sign-in, keys and grants, and
 * the resolver's workspace resolution.
 */

import type { JSONWebKeySet } from "jose";

/** The services of the platform: each one's name is the first token of the subjects it owns. */
export const ServiceName = {
  Gateway: "gateway",
  Rbac: "rbac",
  Resolver: "resolver",
  PluginRegistry: "plugin-registry",
  WebhookDispatcher: "webhook-dispatcher",
  JobReaper: "job-reaper",
} as const;
export type ServiceName = (typeof ServiceName)[keyof typeof ServiceName];

/** `POST /api/auth/login` body, as rbac receives it. */
export interface LoginRequest {
  readonly userName: string;
  readonly password: string;
  readonly workspaceKey?: string | null;
}

export interface LoginReply {
  readonly accessToken: string;
  readonly tokenType: "Bearer";
  readonly expiresIn: number;
}

/** Input of workspace resolution: the public host (no port) and a normalised path. */
export interface ResolveRequest {
  readonly host: string;
  readonly path: string;
}

/** What workspace resolution answers: the visible workspace, if any. */
export interface ResolveResult {
  readonly resolved: boolean;
  readonly workspaceKey: string | null;
}

/** Which of the named workspaces and tenants exist, and each workspace's tenant (for entitlements). */
export interface TenancyLookupRequest {
  readonly workspaceKeys: readonly string[];
  readonly tenantKeys: readonly string[];
}
export interface TenancyLookupReply {
  readonly workspaces: ReadonlyArray<{
    readonly workspaceKey: string;
    readonly tenantKey: string;
    /** The workspace's own `isActive` (an operator's decision). */
    readonly isActive: boolean;
    /** false while the workspace's tenant is suspended. */
    readonly tenantIsActive: boolean;
  }>;
  readonly tenants: readonly string[];
}

/** A visible workspace as the public routes show it: the workspace, its access policy and route. */
export interface PublicWorkspace {
  readonly workspace: { readonly key: string; readonly name: string; readonly type: string };
  readonly accessPolicy: "Public" | "Authenticated";
  readonly tenantKey: string;
  readonly route: {
    /** The workspace's configured public base URL; null when it has none (the gateway derives one). */
    readonly publicBaseUrl: string | null;
    readonly publicHost: string;
    readonly publicPathPrefix: string;
  };
}

/** By host and path (as resolution), or by key (a workspaceKey query value); null when not visible. */
export type PublicWorkspaceRequest =
  { readonly host: string; readonly path: string } | { readonly workspaceKey: string };

/** A surface's navigation: the children of the surface's application root, each with its full path. */
export interface NavigationView {
  readonly workspaceKey: string;
  readonly surfaceKey: string;
  readonly items: ReadonlyArray<{
    readonly key: string;
    readonly title: string;
    readonly path: string;
    readonly fullPath: string;
    readonly order: number;
    readonly hasChildren: boolean;
  }>;
}

/** A workspace's theme as the public routes show it. */
export interface PublicTheme {
  readonly workspaceKey: string;
  readonly themePluginId: string | null;
  readonly themeVersion: string | null;
  readonly valuesByKey: Record<string, string>;
  readonly sectionLayouts: ReadonlyArray<{ readonly section: string; readonly keys: readonly string[] }>;
}

/** What a server-side render of a workspace's surface needs besides the chain and theme (the resolver's). */
export interface SurfaceData {
  readonly navigation: NavigationView["items"];
  readonly snippets: Record<string, { readonly content: string; readonly contentType: string }>;
}

/** The rendered surface, or null with the reason the gateway serves the shell instead. */
export interface RenderedSurface {
  readonly html: string | null;
  readonly reason: "rendered" | "no-chain" | "no-entry" | "template-error";
}

/** What one installed plugin adds: keys to rbac's catalogue, fields to webhook masking, event names. */
export interface PluginContribution {
  readonly pluginId: string;
  readonly version: string;
  readonly permissions: readonly string[];
  readonly sensitiveFields: readonly string[];
  readonly events: readonly string[];
  /** The lifecycle state: only an `active` plugin serves routes and supplies session keys. */
  readonly state: "inactive" | "active" | "failed";
  /** Its routes, dispatched by the gateway under /api/plugins/{pluginId}/ while active. */
  readonly routes: readonly PluginRouteContribution[];
  /** The workspaces whose chain holds it (their admins' sessions carry its keys). */
  readonly workspaces: readonly string[];
  /** The custom fields it defines. */
  readonly customFields: ReadonlyArray<{
    readonly entityName: string;
    readonly key: string;
    readonly label: string;
    readonly type: string;
    readonly required: boolean;
    readonly options: readonly string[];
    readonly description: string | null;
  }>;
}

export interface PluginRouteContribution {
  readonly method: string;
  /** Under /api/plugins/{pluginId}; `:name` segments are parameters. */
  readonly path: string;
  /** The key a caller must hold; "" for any authenticated caller. */
  readonly permission: string;
  /** The entry object's method that answers it (in the request on the plugin's subject). */
  readonly handler: string;
}

declare module "@svc/bus" {
  interface SubjectMap {
    /** Signs a user in and issues an access token. */
    "rbac.auth.login": { request: LoginRequest; reply: LoginReply };
    /** The public keys that verify access tokens (served at /.well-known/jwks.json). */
    "rbac.keys.jwks": { request: Record<string, never>; reply: JSONWebKeySet };
    /** A role's current permission keys (the gateway asks for host.api's, the API-key role). */
    "rbac.roles.grants": {
      request: { role: string };
      reply: { role: string; permissions: readonly string[] };
    };
    /** Resolves the visible workspace for a host and path. */
    "resolver.workspace.resolve": { request: ResolveRequest; reply: ResolveResult };
    /** A visible workspace for the public routes, or null. */
    "resolver.workspace.public": { request: PublicWorkspaceRequest; reply: PublicWorkspace | null };
    /** A visible workspace's navigation, or null when the workspace or surface is not found. */
    "resolver.navigation.get": {
      request: { workspaceKey: string; surfaceKey: string; parentKey?: string; pathPrefix?: string };
      reply: NavigationView | null;
    };
    /** A visible workspace's default surface navigation and its snippets, for rendering. */
    "resolver.surface.data": { request: { workspaceKey: string; pathPrefix: string }; reply: SurfaceData };
    /** The named workspaces (with their tenant) and tenants that exist (at most 500 of each). */
    "resolver.tenancy.lookup": { request: TenancyLookupRequest; reply: TenancyLookupReply };
    /** What every installed plugin contributes to the other services. */
    /** A workspace's public UI chain and theme. */
    "plugin-registry.workspace.public": {
      request: { workspaceKey: string };
      reply: { chain: string[]; theme: PublicTheme };
    };
    /** Renders a workspace's surface over its plugin chain. */
    "plugin-registry.surface.render": {
      request: { workspace: PublicWorkspace; publicBaseUrl: string; path: string; data: SurfaceData };
      reply: RenderedSurface;
    };
    "plugin-registry.contributions.list": {
      request: Record<string, never>;
      reply: { plugins: PluginContribution[] };
    };
  }
  interface BroadcastMap {
    /** A role's grants changed: drop cached grants. */
    "rbac.roles.changed": { role: string };
    /** Tenants, workspaces or bindings changed: drop cached resolutions. */
    "resolver.cache.invalidate": { reason: string };
    /** A plugin was installed, updated, (de)activated, assigned or uninstalled: contributions changed. */
    "plugin-registry.contributions.changed": { pluginId: string };
  }
}
