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

export interface SubjectMap {
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
  /** Tenants, workspaces or bindings changed: drop cached resolutions. */
  "resolver.cache.invalidate": { reason: string };
}
export type Broadcast = keyof BroadcastMap;

/** The service that owns a subject: its first token. */
export function ownerOf(subject: string): string {
  const dot = subject.indexOf(".");
  return dot === -1 ? subject : subject.slice(0, dot);
}
