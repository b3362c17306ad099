import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Two test files at a time, whatever the machine: the integration files wait on NATS, PostgreSQL and
    // timers far more than they compute, so on CI's two cores two at a time took the suite from about 600 s
    // to about 360 s; more would crowd PostgreSQL's 100 connections and the timing-sensitive files.
    maxWorkers: 2,
    projects: [
      {
        test: {
          name: "unit",
          include: ["shared/*/src/**/*.test.ts", "services/*/src/**/*.test.ts"],
          environment: "node",
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          environment: "node",
          globalSetup: ["test/support/global-setup.ts"],
          pool: "forks",
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
