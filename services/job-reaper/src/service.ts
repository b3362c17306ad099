import "./settings.js";

import { createEventPublisher } from "@svc/bus";
import { jobRoutes, serveRoute, ServiceName } from "@svc/contracts";
import { queueDepth } from "@svc/jobs";
import { Gauge } from "@svc/observability";
import type { ServiceDefinition } from "@svc/runtime";

import { listJobsFor } from "./jobs-list.js";
import { startReaper } from "./reaper.js";

/** The job engine's sweeper (expired leases, dead letters), the jobs list and the queue-depth gauge. */
export const jobReaperService: ServiceDefinition = {
  name: ServiceName.JobReaper,
  start({ bus, db, nc, config, log, metrics }) {
    serveRoute(bus, jobRoutes["jobs.list"], async ({ principal, query }) => ({
      status: 200,
      body: await listJobsFor(db, principal, query),
    }));
    const depth = new Gauge({
      name: "svc_jobs_queue_depth",
      help: "Jobs by type and status.",
      labelNames: ["type", "status"] as const,
      registers: [metrics],
      async collect() {
        this.reset();
        for (const row of await queueDepth(db)) this.set({ type: row.type, status: row.status }, row.count);
      },
    });
    void depth;
    const reaper = startReaper(
      db,
      config.backendHost.jobReaperIntervalMs,
      log,
      metrics,
      createEventPublisher(nc, config.subjectPrefix),
    );
    return { afterDrain: () => reaper.stop() };
  },
};
