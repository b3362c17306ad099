/**
 * The operator API's routes, one typed contract each, grouped by the service that owns them (placement
 * in ADR 0003). This package knows no implementation: the gateway builds its routes,
 * guard and OpenAPI description from it, and each service serves its own contracts.
 */
import { jobRoutes } from "./jobs.js";
import { pluginRegistryRoutes } from "./plugin-registry.js";
import { rbacRoutes } from "./rbac.js";
import { resolverRoutes } from "./resolver.js";
import type { RouteContract } from "./route.js";
import { webhookRoutes } from "./webhooks.js";

export * from "./common.js";
export { type ContributionFollower, followContributions, quietUnlessUp } from "./contributions.js";
export { jobRoutes, JobView } from "./jobs.js";
export { pluginRegistryRoutes, PluginView, UploadedPackage } from "./plugin-registry.js";
export { rbacRoutes, RoleView, UserView } from "./rbac.js";
export { type NavItem, resolverRoutes, TenantView, WorkspaceView } from "./resolver.js";
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
  requestRoute,
  type RouteHandler,
  type RouteHandlerWith,
  type RouteImplementation,
  serveRoute,
  serveRoutes,
} from "./serve.js";
export {
  type LoginReply,
  type LoginRequest,
  type NavigationView,
  type PluginContribution,
  type PluginRouteContribution,
  type PublicTheme,
  type PublicWorkspace,
  type PublicWorkspaceRequest,
  type RenderedSurface,
  type ResolveRequest,
  type ResolveResult,
  ServiceName,
  type SurfaceData,
  type TenancyLookupReply,
  type TenancyLookupRequest,
} from "./subjects.js";
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
