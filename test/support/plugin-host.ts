/**
 * A plugin process started directly on a worker pool, outside the registry: the options every such test
 * shares (an entry `index.mjs` exporting `Plugin`, a 64 MB heap, nothing published or failed anywhere).
 */
import { join } from "node:path";

import { createLogger } from "@svc/observability";

import {
  WorkerHost,
  type WorkerHostOptions,
  type WorkerPool,
} from "../../services/plugin-registry/src/runtime/worker-host.js";

const quiet = createLogger("plugin-host", "silent");

/** Starts the plugin in `dir/plugin` (its `index.mjs`) as `pluginId`; `options` replace the defaults. */
export function startPluginHost(
  pool: WorkerPool,
  pluginId: string,
  dir: string,
  options: Partial<WorkerHostOptions> = {},
): WorkerHost {
  return new WorkerHost(pool, {
    pluginId,
    version: "1.0.0",
    root: join(dir, "plugin"),
    entryFile: "index.mjs",
    entryTypeName: "Plugin",
    hangTimeoutMs: 2_000,
    memoryLimitMb: 64,
    startTimeoutMs: 10_000,
    log: quiet,
    publish: async () => undefined,
    onFailure: () => undefined,
    ...options,
  });
}
