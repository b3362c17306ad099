/**
 * Every service runs as its own process, answers on NATS, and on SIGTERM drains and exits 0
 * within 10 seconds; a bad configuration lists every bad variable and exits non-zero.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { join } from "node:path";

import { Bus, connectNats } from "@svc/bus";
import { messageClient, pingMessages, type PingReply } from "@svc/contracts";
import { createLogger } from "@svc/observability";
import { afterAll, describe, expect, it } from "vitest";

import { freePort, repoRoot, SERVICES } from "../scripts/lib/stack.js";
import { createHarness } from "./support/harness.js";

const h = await createHarness();
const children = new Set<ChildProcess>();

function spawnService(name: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ["--import", "tsx", join("services", name, "src", "main.ts")], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let stderr = "";
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdout?.resume();
  const exited = new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) => {
    child.once("exit", (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stderr });
    });
  });
  return { child, exited };
}

/** promtool (Debian: apt-get install prometheus); CI installs it, so there its absence is a failure. */
const promtool = spawnSync("promtool", ["--version"]).status === 0;

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
});

describe("service processes", () => {
  it("all six start, answer their ping over NATS, serve promtool-clean /metrics, and exit 0 within 10 s of SIGTERM", async () => {
    const log = createLogger("test", "silent");
    const nc = await connectNats({
      url: h.env.NATS_URL as string,
      auth: h.natsAuth,
      name: "probe",
      logger: log,
    });
    const bus = new Bus({
      nc,
      prefix: h.env.SVC_SUBJECT_PREFIX as string,
      service: "probe",
      logger: log,
      defaultTimeoutMs: 1_000,
    });
    const port = await freePort();
    const started = await Promise.all(
      SERVICES.map(async (name) => ({
        name,
        ...spawnService(name, await h.envFor(name, { GATEWAY_PORT: String(port) })),
      })),
    );
    try {
      for (const { name } of started) {
        const until = Date.now() + 30_000;
        let reply: PingReply | undefined;
        while (reply === undefined) {
          reply = await messageClient(bus, pingMessages(name))
            .request("ping", {})
            .catch(() => undefined);
          if (reply === undefined) {
            if (Date.now() > until) throw new Error(`${name} did not answer its ping`);
            await new Promise((r) => setTimeout(r, 200));
          }
        }
        expect(reply.service).toBe(name);
      }
      // Every service's metrics, process defaults included, gathered by the gateway.
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toContain('service="job-reaper"');
      expect(metrics).toContain("process_cpu_user_seconds_total");
      if (promtool || process.env.CI) {
        // Throws (and fails the test) with promtool's findings when it refuses the exposition.
        execFileSync("promtool", ["check", "metrics"], { input: metrics, stdio: ["pipe", "pipe", "pipe"] });
      }
      const stopAt = Date.now();
      for (const { child } of started) child.kill("SIGTERM");
      const results = await Promise.all(started.map((s) => s.exited));
      expect(Date.now() - stopAt).toBeLessThan(10_000);
      for (const result of results) expect(result).toMatchObject({ code: 0, signal: null });
    } finally {
      await nc.close();
    }
  }, 60_000);

  it("refuses a bad configuration, naming every bad variable, with exit status 78", async () => {
    // The gateway checks the platform's settings and its own (GATEWAY_PORT, the rate limits).
    const { exited } = spawnService("gateway", {
      ...h.env,
      GATEWAY_PORT: "eighty",
      DATABASE_URL: "mysql://nope",
      BackendHost__RateLimitApiPerMinute: "-5",
      NODE_ENV: "staging",
    });
    const result = await exited;
    expect(result.code).toBe(78);
    for (const variable of [
      "GATEWAY_PORT",
      "DATABASE_URL",
      "BackendHost__RateLimitApiPerMinute",
      "NODE_ENV",
    ]) {
      expect(result.stderr).toContain(variable);
    }
  }, 30_000);

  it("started without NODE_ENV, applies production rules: the built-in keys are refused, saying why", async () => {
    const env: Record<string, string> = { ...h.env };
    delete env.NODE_ENV;
    for (const name of Object.keys(env))
      if (/JwtSigningKey|SecretsEncryptionKey/.test(name)) delete env[name];
    const rbac = await spawnService("rbac", env).exited;
    expect(rbac.code).toBe(78);
    expect(rbac.stderr).toContain("BackendHost__JwtSigningKey");
    expect(rbac.stderr).toMatch(/unless NODE_ENV=development is set explicitly/);
    const registry = await spawnService("plugin-registry", {
      ...env,
      BackendHost__AllowUnsignedPlugins: "true",
    }).exited;
    expect(registry.code).toBe(78);
    expect(registry.stderr).toContain("BackendHost__AllowUnsignedPlugins");
  }, 30_000);
});
