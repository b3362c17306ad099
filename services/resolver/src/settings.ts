/** The resolver's settings. */
import { defineSettings, setting, type SettingsOf } from "@svc/config";

export const resolverSettings = defineSettings({
  owner: "resolver",
  top: {},
  backendHost: {
    defaultTenantKey: setting.optionalString(
      "BackendHost:DefaultTenantKey",
      "only this tenant's workspaces are visible (spec 2.1.2)",
    ),
  },
});

declare module "@svc/config" {
  interface BackendHostSettings extends SettingsOf<typeof resolverSettings.backendHost> {}
}
