/**
 * The one typed map from NATS subject to request and reply types, shared by every caller and handler.
 * Subjects are written here without the deployment prefix (`svc` by default); the Bus adds it.
 * A wrong payload is a compile error on both sides.
 */

export const ServiceName = {
  Gateway: "gateway",
  Rbac: "rbac",
  Resolver: "resolver",
  PluginRegistry: "plugin-registry",
  WebhookDispatcher: "webhook-dispatcher",
  JobReaper: "job-reaper",
} as const;
export type ServiceName = (typeof ServiceName)[keyof typeof ServiceName];

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

/** What one replica of a service says about itself. */
export interface PingReply {
  readonly service: ServiceName;
  readonly instance: string;
  readonly version: string;
  readonly uptimeMs: number;
}

/** Session scope (spec 5.2). */
export const Scope = { Platform: "platform", Workspace: "workspace" } as const;
export type Scope = (typeof Scope)[keyof typeof Scope];

/**
 * Who is calling, as the gateway established it; travels with every operator request so that the owning
 * service applies the caller's reach (scope and workspace) to what it returns.
 */
export interface Principal {
  readonly subject: string;
  /** null: no scope claim, which never grants platform reach (spec 5.2.4). */
  readonly scope: Scope | null;
  readonly workspaceKey: string | null;
  readonly permissions: readonly string[];
  readonly roles: readonly string[];
}

/**
 * What the gateway sends a service for an operator route: the authenticated principal and the validated
 * route parameters, query and body. The route's schemas (in the gateway's catalogue) give their shapes.
 */
export interface RouteRequest<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  readonly principal: Principal;
  readonly params: P;
  readonly query: Q;
  readonly body: B;
}

/** A service's answer to an operator route; errors travel as SvcErrors instead. */
export interface RouteReply<T = unknown> {
  readonly status: number;
  readonly body?: T;
  readonly headers?: Readonly<Record<string, string>>;
}

/** One replica's metrics, as prom-client's `getMetricsAsJSON()`. */
export interface MetricsReply {
  readonly service: string;
  readonly instance: string;
  readonly metrics: readonly unknown[];
}

/** `POST /api/auth/login` body. */
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

export interface SubjectMap {
  /** Signs a user in and issues an access token (spec 5, issue 3). */
  "rbac.auth.login": { request: LoginRequest; reply: LoginReply };
  /** The public keys that verify access tokens (served at /.well-known/jwks.json). */
  "rbac.keys.jwks": {
    request: Record<string, never>;
    reply: { keys: ReadonlyArray<Record<string, unknown>> };
  };
  /** A role's current permission keys (the gateway asks for host.api's, the API-key role). */
  "rbac.roles.grants": { request: { role: string }; reply: { role: string; permissions: readonly string[] } };
  /** Every replica of every service answers (fan-out, no queue group): the gateway's /metrics gathers them. */
  "metrics.collect": { request: Record<string, never>; reply: MetricsReply };
  /** Resolves the visible workspace for a host and path (spec 2.1.1–2.1.3). */
  "resolver.workspace.resolve": { request: ResolveRequest; reply: ResolveResult };
  /** Any replica of the gateway answers with its identity. */
  "gateway.ping": { request: Record<string, never>; reply: PingReply };
  /** Any replica of rbac answers with its identity. */
  "rbac.ping": { request: Record<string, never>; reply: PingReply };
  /** Any replica of the resolver answers with its identity. */
  "resolver.ping": { request: Record<string, never>; reply: PingReply };
  /** Any replica of the plugin registry answers with its identity. */
  "plugin-registry.ping": { request: Record<string, never>; reply: PingReply };
  /** Any replica of the webhook dispatcher answers with its identity. */
  "webhook-dispatcher.ping": { request: Record<string, never>; reply: PingReply };
  /** Any replica of the job reaper answers with its identity. */
  "job-reaper.ping": { request: Record<string, never>; reply: PingReply };
}
export type Subject = keyof SubjectMap;
export type RequestOf<S extends Subject> = SubjectMap[S]["request"];
export type ReplyOf<S extends Subject> = SubjectMap[S]["reply"];

/** Fan-out notifications (core NATS publish, every subscriber gets each one, nothing durable). */
export interface BroadcastMap {
  /** A role's grants changed: drop cached grants. */
  "rbac.roles.changed": { role: string };
  /** Tenants, workspaces or bindings changed: drop cached resolutions. */
  "resolver.cache.invalidate": { reason: string };
}
export type Broadcast = keyof BroadcastMap;

/** The service that owns a subject: its first token. */
export function ownerOf(subject: string): string {
  const dot = subject.indexOf(".");
  return dot === -1 ? subject : subject.slice(0, dot);
}
