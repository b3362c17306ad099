import { ServiceName } from "@svc/bus";
import type { ServiceDefinition } from "@svc/runtime";

/**
 * The job engine's sweeper (expired leases, dead letters) and the jobs list.
 * This foundation answers `job-reaper.ping` and owns its schema; its handlers arrive with the issues that build it.
 */
export const jobReaperService: ServiceDefinition = {
  name: ServiceName.JobReaper,
  start() {
    return undefined;
  },
};
