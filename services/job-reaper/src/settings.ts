/** The job reaper's settings. */
import { type ConfigOf, defineSettings, setting } from "@svc/config";

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

/** The configuration this service reads: the platform's settings and its own. */
export type JobReaperConfig = ConfigOf<typeof jobReaperSettings>;
