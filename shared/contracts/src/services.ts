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
