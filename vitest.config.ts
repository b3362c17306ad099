import { relative } from "node:path";

import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The longest files, started first: on a fresh clone (CI) vitest knows no durations and runs the files in
 * name order, so one of these could start last and run alone at the end. Where vitest has a cache, it
 * orders the rest by their last durations.
 */
const LONGEST_FIRST = [
  "test/dev-stack.test.ts",
  "test/api-baseline.test.ts",
  "test/nats-cluster.test.ts",
  "test/webhooks.test.ts",
  "test/plugin-runtime.test.ts",
  "test/admin-console.test.ts",
  "test/svc-plugin-package.test.ts",
  "test/idle-connections.test.ts",
  "test/gateway-replicas.test.ts",
  "test/jobs.test.ts",
  "test/postgres-failover.test.ts",
  "test/nats-permissions.test.ts",
  "test/openapi-lint.test.ts",
  "test/fuzz.test.ts",
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const at = LONGEST_FIRST.indexOf(relative(process.cwd(), file.moduleId));
      return at === -1 ? LONGEST_FIRST.length : at;
    };
    // Array.prototype.sort is stable: the others keep vitest's order.
    return [...(await super.sort(files))].sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    // Three test files at a time, whatever the machine: the integration files wait on NATS, PostgreSQL and
    // timers far more than they compute. On two cores the suite used under half the CPU with two at a time
    // (229 s wall for 213 s of CPU); three took it to 171 s for the same CPU, with at most 58 of
    // PostgreSQL's 100 connections open (sampled every half second).
    maxWorkers: 3,
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        test: {
          name: "unit",
          include: ["shared/*/src/**/*.test.ts", "services/*/src/**/*.test.ts"],
          environment: "node",
          // One module graph per worker: each file imported the contracts (and compiled their schemas)
          // afresh, which was most of the project's time. The unit files keep their state in their own
          // tables and fakes, never in a shared module.
          isolate: false,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          environment: "node",
          globalSetup: ["test/support/global-setup.ts"],
          pool: "forks",
          // One module graph per worker, not per file: the files share no module state (no registry is filled
          // by imports), and loading every service for each file cost about a quarter of the suite's CPU.
          isolate: false,
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
