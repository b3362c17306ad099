/**
 * The operator API's routes, one typed contract each, grouped by the service that owns them (placement
 * in ADR 0003). This package knows no implementation: the gateway builds its routes,
 * guard and OpenAPI description from it, and each service serves its own contracts.
 */
import type { RouteContract } from "./route.js";
import { SERVICE_CONTRACTS } from "./service-contracts.js";

export { caller, callMessage, callRoute, refusalOf } from "./call.js";
export * from "./common.js";
export { configRoutes } from "./config.js";
export { type ContributionFollower, followContributions, quietUnlessUp } from "./contributions.js";
export {
  type PlatformEventData,
  type PlatformEventName,
  platformEvents,
  publishPlatformEvent,
} from "./events.js";
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
export {
  defineServiceContract,
  gatewayContract,
  jobReaperContract,
  pluginRegistryContract,
  rbacContract,
  resolverContract,
  SERVICE_CONTRACTS,
  type ServiceContract,
  webhookDispatcherContract,
} from "./service-contracts.js";
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

/** Every operator route, each once: the routes of every service's contract. */
export const OPERATOR_ROUTES: readonly RouteContract[] = SERVICE_CONTRACTS.flatMap((c) =>
  Object.values(c.routes),
);
export {
  refuseClosedWorkspace,
  type WorkspaceState,
  workspaceStateOf,
  WorkspaceStates,
} from "./workspace-states.js";
