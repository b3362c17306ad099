/**
 * One contract per service: the operator routes and the messages it serves. A service's definition
 * (`defineService` in @svc/runtime) must implement exactly this, one handler each, or it does not compile;
 * the gateway forwards the routes of all of them (`OPERATOR_ROUTES`). Its broadcasts are beside its
 * messages (`<service>Broadcasts`), its settings in its package (`settings.ts`), its job types with their
 * owner's code (`defineJob`).
 */
import { configRoutes } from "./config.js";
import { jobRoutes } from "./jobs.js";
import { mediaRoutes } from "./media.js";
import type { MessageContract } from "./messages.js";
import { pluginRegistryMessages, pluginRegistryRoutes } from "./plugin-registry.js";
import { rbacMessages, rbacRoutes } from "./rbac.js";
import { resolverMessages, resolverRoutes } from "./resolver.js";
import type { RouteContract } from "./route.js";
import { ServiceName } from "./services.js";
import { webhookRoutes } from "./webhooks.js";

export interface ServiceContract<
  Name extends ServiceName = ServiceName,
  Routes extends Record<string, RouteContract> = Record<string, RouteContract>,
  Messages extends Record<string, MessageContract> = Record<string, MessageContract>,
> {
  readonly name: Name;
  readonly routes: Routes;
  readonly messages: Messages;
}

/** A service's contract from its routes and messages (either may be absent). */
export function defineServiceContract<
  const Name extends ServiceName,
  const Routes extends Record<string, RouteContract> = Record<never, RouteContract>,
  const Messages extends Record<string, MessageContract> = Record<never, MessageContract>,
>(
  name: Name,
  parts: { readonly routes?: Routes; readonly messages?: Messages },
): ServiceContract<Name, Routes, Messages> {
  return {
    name,
    routes: parts.routes ?? ({} as Routes),
    messages: parts.messages ?? ({} as Messages),
  };
}

/** The gateway serves HTTP; it answers nothing on the bus but what every service does. */
export const gatewayContract = defineServiceContract(ServiceName.Gateway, {});
export const rbacContract = defineServiceContract(ServiceName.Rbac, {
  routes: rbacRoutes,
  messages: rbacMessages,
});
/** The resolver process also serves the configuration and media routes (ADR 0015). */
export const resolverContract = defineServiceContract(ServiceName.Resolver, {
  routes: { ...resolverRoutes, ...configRoutes, ...mediaRoutes },
  messages: resolverMessages,
});
export const pluginRegistryContract = defineServiceContract(ServiceName.PluginRegistry, {
  routes: pluginRegistryRoutes,
  messages: pluginRegistryMessages,
});
export const webhookDispatcherContract = defineServiceContract(ServiceName.WebhookDispatcher, {
  routes: webhookRoutes,
});
export const jobReaperContract = defineServiceContract(ServiceName.JobReaper, { routes: jobRoutes });

/** Every service's contract. */
export const SERVICE_CONTRACTS: readonly ServiceContract[] = [
  gatewayContract,
  resolverContract,
  pluginRegistryContract,
  rbacContract,
  webhookDispatcherContract,
  jobReaperContract,
];
