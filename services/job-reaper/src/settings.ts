/** The job reaper's settings. */
import { defineSettings, setting, type SettingsOf } from "@svc/config";

export const jobReaperSettings = defineSettings({
  owner: "job-reaper",
  top: {},
  backendHost: {
    jobReaperIntervalMs: setting.int(
      "BackendHost:JobReaperIntervalMs",
      10_000,
      50,
      3_600_000,
      "how often expired job leases are swept",
    ),
  },
});

declare module "@svc/config" {
  interface BackendHostSettings extends SettingsOf<typeof jobReaperSettings.backendHost> {}
}
