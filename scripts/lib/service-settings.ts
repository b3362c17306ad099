/**
 * Every service's settings declaration, for what reads all of them: the settings reference (README and
 * operator guide), and a process that starts every service (the fuzzer, the test harness).
 */
import type { AnySettingsDeclaration } from "@svc/config";
import { gatewaySettings } from "@svc/service-gateway";
import { jobReaperSettings } from "@svc/service-job-reaper";
import { pluginRegistrySettings } from "@svc/service-plugin-registry";
import { rbacSettings } from "@svc/service-rbac";
import { resolverSettings } from "@svc/service-resolver";
import { webhookSettings } from "@svc/service-webhook-dispatcher";

/** In the order the settings reference lists them, after the platform's. */
export const ALL_SERVICE_SETTINGS: readonly AnySettingsDeclaration[] = [
  gatewaySettings,
  rbacSettings,
  resolverSettings,
  webhookSettings,
  jobReaperSettings,
  pluginRegistrySettings,
];
