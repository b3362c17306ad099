import { createEventPublisher, EventSource } from "@svc/bus";
import { jobReaperContract, type RouteImplementation } from "@svc/contracts";
import { queueDepth } from "@svc/jobs";
import { Gauge } from "@svc/observability";
import { defineService } from "@svc/runtime";

import { cancelJobRoute, jobTable, listJobsRoute, retryJobRoute, runJobNowRoute } from "./jobs-list.js";
import { startReaper, startRetention } from "./reaper.js";
import { followRecording, NatsRecordingStore, Recorder } from "./recorder.js";
import { jobReaperSettings } from "./settings.js";

/**
 * The job engine's sweeper (expired leases, dead letters), the jobs list, the queue-depth gauge and the
 * diagnostics recorder's API.
 */
export const jobReaperService = defineService(jobReaperContract, {
  settings: jobReaperSettings,
  // A keyed write's outcome is kept in the transaction of its change.
  keyedWrites: "transaction",
  async start({ db, nc, config, log, metrics, provision }) {
    const recordings = new NatsRecordingStore(nc, config.subjectPrefix, config.backendHost.natsReplicas);
    const recorder = new Recorder(recordings, log);
    const following = followRecording(recordings, recorder);
    await provision("diagnostics recorder", following.start);
    const listDeps = { jobs: jobTable(db) };
    const routes: RouteImplementation<typeof jobReaperContract.routes> = {
      "jobs.list": (req) => listJobsRoute(listDeps, req),
      "jobs.retry": (req) => retryJobRoute(listDeps, req),
      "jobs.run-now": (req) => runJobNowRoute(listDeps, req),
      "jobs.cancel": (req) => cancelJobRoute(listDeps, req),
      "diagnostics.start": (req) => recorder.startRecording(req),
      "diagnostics.stop": () => recorder.stopRecording(),
      "diagnostics.get": (req) => recorder.read(req),
    };
    const depth = new Gauge({
      name: "svc_jobs_queue_depth",
      help: "Jobs by type and status.",
      labelNames: ["type", "status"] as const,
      registers: [metrics],
      // Every replica reads the same table: the gateway's aggregate /metrics takes one, not the sum.
      aggregator: "max",
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
      createEventPublisher(nc, config.subjectPrefix, EventSource.Platform),
    );
    const retention = startRetention(db, config.backendHost.jobRetentionDays, log, metrics);
    return {
      routes,
      messages: {},
      beforeDrain: async () => following.stop(),
      afterDrain: async () => {
        await reaper.stop();
        await retention.stop();
      },
    };
  },
});
