/** Routes the job reaper owns: the jobs list and the diagnostics recorder. */
import { Type } from "@sinclair/typebox";

import { Nullable, Page, pageFields } from "./common.js";
import { defineRoutes } from "./route.js";

/** Spec 2.4: a job record as the list shows it (the payload is not shown). */
export const JobView = Type.Object({
  id: Type.String(),
  type: Type.String(),
  status: Type.String(),
  workspaceKey: Nullable(Type.String()),
  attempts: Type.Integer(),
  maxAttempts: Type.Integer(),
  scheduledAtUtc: Type.String(),
  createdAtUtc: Type.String(),
  startedAtUtc: Nullable(Type.String()),
  completedAtUtc: Nullable(Type.String()),
  lastError: Nullable(Type.String()),
});

export const jobRoutes = defineRoutes("job-reaper", {
  "jobs.list": {
    method: "GET",
    path: "/api/jobs",
    permission: "job.read",
    summary: "List background jobs (dead letters included)",
    query: Type.Object(
      {
        status: Type.Optional(
          Type.Union(["Pending", "Running", "Succeeded", "Failed"].map((s) => Type.Literal(s))),
        ),
        type: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
        workspaceKey: Type.Optional(Type.String({ maxLength: 63 })),
        ...pageFields,
      },
      { additionalProperties: false },
    ),
    reply: Page(JobView),
  },
  "diagnostics.start": {
    method: "POST",
    path: "/api/diagnostics/recorder/start",
    permission: "diagnostics.record",
    summary: "Start the diagnostics recorder",
  },
  "diagnostics.stop": {
    method: "POST",
    path: "/api/diagnostics/recorder/stop",
    permission: "diagnostics.record",
    summary: "Stop the diagnostics recorder",
  },
  "diagnostics.get": {
    method: "GET",
    path: "/api/diagnostics/recorder",
    permission: "diagnostics.record",
    summary: "The diagnostics recording",
  },
});
