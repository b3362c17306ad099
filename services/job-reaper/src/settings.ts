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
    jobRetentionDays: setting.int(
      "BackendHost:JobRetentionDays",
      30,
      7,
      3_650,
      "days an ended job (succeeded, or a dead letter) stays listed in GET /api/jobs before it is deleted; swept hourly in batches. Keep it at least WebhookDeliveryLogDays: a delivery is sent again from its job",
    ),
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type JobReaperConfig = ConfigOf<typeof jobReaperSettings>;
