/** The resolver's settings. */
import { defineSettings, setting, type SettingsOf } from "@svc/config";

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

declare module "@svc/config" {
  interface BackendHostSettings extends SettingsOf<typeof resolverSettings.backendHost> {}
}
