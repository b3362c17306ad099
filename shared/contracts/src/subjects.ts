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

/** Spec 2.2 ResolveResult. */
export interface ResolveResult {
  readonly resolved: boolean;
  readonly workspaceKey: string | null;
}

/** What one installed plugin adds: keys to rbac's catalogue, fields to webhook masking, event names. */
export interface PluginContribution {
  readonly pluginId: string;
  readonly permissions: readonly string[];
  readonly sensitiveFields: readonly string[];
  readonly events: readonly string[];
}

declare module "@svc/bus" {
  interface SubjectMap {
    /** Signs a user in and issues an access token (spec 5, issue 3). */
    "rbac.auth.login": { request: LoginRequest; reply: LoginReply };
    /** The public keys that verify access tokens (served at /.well-known/jwks.json). */
    "rbac.keys.jwks": { request: Record<string, never>; reply: JSONWebKeySet };
    /** A role's current permission keys (the gateway asks for host.api's, the API-key role). */
    "rbac.roles.grants": {
      request: { role: string };
      reply: { role: string; permissions: readonly string[] };
    };
    /** Resolves the visible workspace for a host and path (spec 2.1.1–2.1.3). */
    "resolver.workspace.resolve": { request: ResolveRequest; reply: ResolveResult };
    /** What every installed plugin contributes to the other services (issue 11, item 8). */
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
    /** A plugin was installed, updated or uninstalled: its contributions changed. */
    "plugin-registry.contributions.changed": { pluginId: string };
  }
}
