/** The resolver's settings. */
import { type ConfigOf, defineSettings, setting } from "@svc/config";

export const resolverSettings = defineSettings({
  owner: "resolver",
  top: {},
  backendHost: {
    defaultTenantKey: setting.optionalString(
      "BackendHost:DefaultTenantKey",
      "only this tenant's workspaces are visible",
    ),
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type ResolverConfig = ConfigOf<typeof resolverSettings>;
