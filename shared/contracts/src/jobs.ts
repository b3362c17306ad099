/** Routes the job reaper owns: the jobs list and the diagnostics recorder. */
import { Type } from "@sinclair/typebox";

import { Nullable, Page, pageFields } from "./common.js";
import { defineRoutes } from "./route.js";

/** A job record as the list shows it (the payload is not shown). */
export const JobView = Type.Object({
  id: Type.String(),
  type: Type.String(),
  status: Type.Union([
    Type.Literal("Pending"),
    Type.Literal("Running"),
    Type.Literal("Succeeded"),
    Type.Literal("Failed"),
  ]),
  workspaceKey: Nullable(Type.String()),
  attempts: Type.Integer(),
  maxAttempts: Type.Integer(),
  scheduledAtUtc: Type.String(),
  createdAtUtc: Type.String(),
  startedAtUtc: Nullable(Type.String()),
  completedAtUtc: Nullable(Type.String()),
  lastError: Nullable(Type.String()),
});

/** The diagnostics recorder's recording. */
export const RecordingView = Type.Object({
  id: Type.String(),
  status: Type.Union([Type.Literal("recording"), Type.Literal("stopped")]),
  kinds: Type.Array(Type.String()),
  maxEntries: Type.Integer(),
  entryCount: Type.Integer(),
  startedAtUtc: Type.String(),
  stopsAtUtc: Type.String(),
  stoppedAtUtc: Nullable(Type.String()),
  stopReason: Nullable(Type.Union([Type.Literal("operator"), Type.Literal("time"), Type.Literal("entries")])),
  startedBy: Type.String(),
});

/** One recorded operation: a database statement with its literals, or a NATS request. */
export const RecordedEntryView = Type.Object({
  atUtc: Type.String(),
  service: Type.String(),
  instance: Type.String(),
  kind: Type.Union([Type.Literal("database"), Type.Literal("nats")]),
  text: Type.String(),
  durationMs: Type.Number(),
  outcome: Type.String(),
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
  "jobs.retry": {
    method: "POST",
    path: "/api/jobs/:id/retry",
    permission: "job.execute",
    summary:
      "Retry a dead letter (a Failed job): Pending now for one more attempt; 409 for a job that is not Failed",
    params: Type.Object(
      { id: Type.String({ pattern: "^[1-9][0-9]{0,18}$" }) },
      { additionalProperties: false },
    ),
    reply: JobView,
  },
  "jobs.run-now": {
    method: "POST",
    path: "/api/jobs/:id/run-now",
    permission: "job.execute",
    summary:
      "Make a waiting (Pending) job due now, without waiting out its backoff or a receiver's circuit; 409 for a job that is not Pending",
    params: Type.Object(
      { id: Type.String({ pattern: "^[1-9][0-9]{0,18}$" }) },
      { additionalProperties: false },
    ),
    reply: JobView,
  },
  "jobs.cancel": {
    method: "POST",
    path: "/api/jobs/:id/cancel",
    permission: "job.execute",
    summary:
      "End a waiting (Pending) job: Failed, a dead letter that can be retried, with who cancelled it as its last error; 409 for a job that is not Pending (a running job finishes its attempt)",
    params: Type.Object(
      { id: Type.String({ pattern: "^[1-9][0-9]{0,18}$" }) },
      { additionalProperties: false },
    ),
    reply: JobView,
  },
  "diagnostics.start": {
    method: "POST",
    path: "/api/diagnostics/recorder/start",
    permission: "diagnostics.record",
    summary:
      "Start recording, across all services, database commands (with literals) and NATS requests; stops by itself",
    body: Type.Object(
      {
        /** How long the recording runs at most (default 60). */
        maxDurationSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 600 })),
        /** How many entries it keeps at most (default 1,000). */
        maxEntries: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
        /** What it records (default both). */
        kinds: Type.Optional(
          Type.Array(Type.Union([Type.Literal("database"), Type.Literal("nats")]), {
            minItems: 1,
            maxItems: 2,
            uniqueItems: true,
          }),
        ),
      },
      {
        additionalProperties: false,
        examples: [{ maxDurationSeconds: 30, maxEntries: 2_000, kinds: ["database", "nats"] }],
      },
    ),
    reply: RecordingView,
  },
  "diagnostics.stop": {
    method: "POST",
    path: "/api/diagnostics/recorder/stop",
    permission: "diagnostics.record",
    summary: "Stop the running recording (its entries stay readable for 24 hours)",
    reply: RecordingView,
  },
  "diagnostics.get": {
    method: "GET",
    path: "/api/diagnostics/recorder",
    permission: "diagnostics.record",
    summary: "The last recording: its state and a page of its entries, oldest first",
    query: Type.Object(
      {
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })),
        cursor: Type.Optional(Type.String({ pattern: "^[0-9]{1,15}$" })),
      },
      { additionalProperties: false },
    ),
    reply: Type.Composite([
      RecordingView,
      Type.Object({ items: Type.Array(RecordedEntryView), nextCursor: Nullable(Type.String()) }),
    ]),
  },
});
