import type { ChildProcess } from "node:child_process";

import { freshKeys, SERVICE_ENV } from "../../scripts/lib/stack.js";

/**
 * The environment of a benchmark's services: production mode (as deployed), so fresh keys for this run
 * (production refuses the built-in development ones), its own database, subject prefix and stream, and
 * the environment the image gives them (`SERVICE_ENV`).
 */
export function productionEnv(o: { databaseUrl: string; natsUrl: string; prefix: string; stream: string }) {
  return {
    ...SERVICE_ENV,
    NODE_ENV: "production",
    LOG_LEVEL: "warn",
    DATABASE_URL: o.databaseUrl,
    NATS_URL: o.natsUrl,
    SVC_SUBJECT_PREFIX: o.prefix,
    SVC_EVENTS_STREAM: o.stream,
    ...freshKeys(),
  };
}

export { SERVICE_NODE_FLAGS } from "../../scripts/lib/stack.js";

/** Stops a service a benchmark started: SIGTERM, SIGKILL after 12 s; at once when it has exited already. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 12_000).unref();
  });
}
