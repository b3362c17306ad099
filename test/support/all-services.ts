/** The six services in the order a test starts them: the gateway last, once what it forwards to answers. */
import type { RunningService, ServiceDefinition } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";

import type { Harness } from "./harness.js";

export const ALL_SERVICES: readonly ServiceDefinition[] = [
  rbacService,
  resolverService,
  jobReaperService,
  webhookDispatcherService,
  pluginRegistryService,
  gatewayService,
];

/** Starts every service with these extra variables, one after the other. */
export async function startAllServices(
  h: Harness,
  env: Record<string, string> = {},
): Promise<Array<{ name: string; service: RunningService }>> {
  const started: Array<{ name: string; service: RunningService }> = [];
  for (const definition of ALL_SERVICES) {
    started.push({ name: definition.name, service: await h.start(definition, env) });
  }
  return started;
}
