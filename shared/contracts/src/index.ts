/**
 * The operator API's routes, one typed contract each, grouped by the service that owns them (placement
 * in ADR 0003). This package knows no implementation: the gateway builds its routes,
 * guard and OpenAPI description from it, and each service serves its own contracts.
 */
import { configRoutes } from "./config.js";
import { jobRoutes } from "./jobs.js";
import { mediaRoutes } from "./media.js";
import { pluginRegistryRoutes } from "./plugin-registry.js";
import { rbacRoutes } from "./rbac.js";
import { resolverRoutes } from "./resolver.js";
import type { RouteContract } from "./route.js";
import { webhookRoutes } from "./webhooks.js";

export * from "./common.js";
export { configRoutes } from "./config.js";
export { type ContributionFollower, followContributions, quietUnlessUp } from "./contributions.js";
export { jobRoutes, JobView } from "./jobs.js";
export { mediaRoutes, MediaView } from "./media.js";
export {
  type BroadcastContract,
  type BroadcastSpec,
  defineBroadcasts,
  defineMessages,
  type MessageClient,
  messageClient,
  type MessageContract,
  type MessageHandler,
  type MessageImplementation,
  type MessageSpec,
  onBroadcast,
  type PayloadOf,
  publishBroadcast,
  type ReplyOfMessage,
  type RequestOfMessage,
  serveMessage,
  serveMessages,
} from "./messages.js";
export {
  PluginContribution,
  pluginRegistryBroadcasts,
  pluginRegistryMessages,
  pluginRegistryRoutes,
  PluginRouteContribution,
  PluginView,
  PublicTheme,
  RenderedSurface,
  UploadedPackage,
} from "./plugin-registry.js";
export {
  Jwks,
  LoginReply,
  LoginRequest,
  rbacBroadcasts,
  rbacMessages,
  rbacRoutes,
  RoleView,
  UserView,
} from "./rbac.js";
export {
  NavigationView,
  type NavItem,
  PublicWorkspace,
  PublicWorkspaceRequest,
  resolverBroadcasts,
  ResolveRequest,
  ResolveResult,
  resolverMessages,
  resolverRoutes,
  SurfaceData,
  TenancyLookupReply,
  TenancyLookupRequest,
  TenantView,
  WorkspaceView,
} from "./resolver.js";
export {
  type BodyOf,
  defineRoutes,
  type HttpMethod,
  type ParamsOf,
  type QueryOf,
  type ReplyBodyOf,
  type ReplyOfRoute,
  type RequestOfRoute,
  type RouteContract,
  type RouteSpec,
} from "./route.js";
export {
  configMessages,
  metricsMessages,
  type MetricsReply,
  pingMessages,
  PingReply,
  SettingDescription,
} from "./runtime.js";
export {
  requestRoute,
  type RouteHandler,
  type RouteHandlerWith,
  type RouteImplementation,
  serveRoute,
  serveRoutes,
} from "./serve.js";
export { ServiceName } from "./services.js";
export {
  FlowAction,
  FlowView,
  MAX_FLOW_ACTIONS,
  MAX_TARGET_URL,
  SUBSCRIPTION_PATTERN,
  SubscriptionView,
  webhookRoutes,
} from "./webhooks.js";

/** Every operator route, each once. */
export const OPERATOR_ROUTES: readonly RouteContract[] = [
  ...Object.values(resolverRoutes),
  ...Object.values(configRoutes),
  ...Object.values(mediaRoutes),
  ...Object.values(pluginRegistryRoutes),
  ...Object.values(rbacRoutes),
  ...Object.values(webhookRoutes),
  ...Object.values(jobRoutes),
];
export {
  refuseClosedWorkspace,
  type WorkspaceState,
  workspaceStateOf,
  WorkspaceStates,
} from "./workspace-states.js";
