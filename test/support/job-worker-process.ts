/**
 * A job worker in a process of its own, so tests can kill or freeze it for real. Handles `noop` jobs:
 * prints `started <id>` when a handler starts, sleeps `payload.sleepMs`, and prints its stats as JSON
 * whenever they change. Environment: DATABASE_URL, LEASE_MS.
 */
import { createDb } from "@svc/db";
import { JobWorker, noopJob } from "@svc/jobs";
import { createLogger } from "@svc/observability";

const databaseUrl = process.env.DATABASE_URL as string;
const db = createDb({ databaseUrl, maximumPoolSize: 2, applicationName: "test-worker" });
const worker = new JobWorker({
  db,
  databaseUrl,
  workerId: `child-${process.pid}`,
  log: createLogger("test-worker", "silent"),
  leaseMs: Number(process.env.LEASE_MS ?? 1_000),
  pollIntervalMs: 100,
});
worker.register(noopJob, {
  concurrency: 1,
  handler: async (job) => {
    process.stdout.write(`started ${job.id}\n`);
    await new Promise((r) => setTimeout(r, Number(job.payload.sleepMs ?? 0)));
  },
});
await worker.start();
let last = "";
setInterval(() => {
  const now = JSON.stringify(worker.stats);
  if (now !== last) process.stdout.write(`stats ${now}\n`);
  last = now;
}, 20);
