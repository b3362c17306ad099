/**
 * Every service has a management listener for probes and a per-pod scrape. Each one's
 * readiness turns false when its NATS connection is cut and true again when NATS is back; liveness does
 * not depend on NATS; `/metrics` serves the replica's own metrics.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { PLUGIN_CONTRACT_VERSION } from "@svc/plugin-sdk";
import { HOST_VERSION, type RunningService } from "@svc/runtime";
import { jobReaperService } from "@svc/service-job-reaper";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { startAllServices } from "./support/all-services.js";
import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";
import { TcpProxy } from "./support/tcp-proxy.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
const nats = new URL(h.env.NATS_URL as string);
const proxy = new TcpProxy(nats.hostname, Number(nats.port || 4222));
const services: Array<{ name: string; service: RunningService }> = [];
const promtool = spawnSync("promtool", ["--version"]).status === 0;

const address = (s: RunningService) => s.hooks.managementAddress as string;
const ready = async (s: RunningService) => (await http(`${address(s)}/ready`, { timeoutMs: 3_000 })).status;

beforeAll(async () => {
  const port = await proxy.open();
  const env = {
    NATS_URL: h.busVia(port),
    MANAGEMENT_PORT: "0",
    MANAGEMENT_HOST: "127.0.0.1",
  };
  services.push(...(await startAllServices(h, env)));
}, 60_000);

afterAll(async () => {
  await proxy.open().catch(() => undefined);
  await h.stopAll();
  await proxy.close();
});

describe("management listeners", () => {
  it("every service is live and ready, and serves its own metrics", async () => {
    for (const { name, service } of services) {
      expect(address(service), name).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const health = await http(`${address(service)}/health`);
      expect(health.status, name).toBe(200);
      expect(health.json(), name).toEqual({ status: "ok", version: HOST_VERSION });
      // What this build is. Run from the sources, commit and build time are unknown.
      expect((await http(`${address(service)}/version`)).json(), name).toEqual({
        service: name,
        version: HOST_VERSION,
        commit: null,
        builtAt: null,
        pluginContractVersion: PLUGIN_CONTRACT_VERSION,
        node: process.version,
      });
      const r = await http(`${address(service)}/ready`);
      expect(r.status, name).toBe(200);
      expect(r.json(), name).toEqual({
        status: "ready",
        checks: { postgres: "up", nats: "up" },
        storage: { status: "ok", short: [] },
      });
      const metrics = await http(`${address(service)}/metrics`);
      expect(metrics.status, name).toBe(200);
      expect(metrics.headers["content-type"], name).toMatch(/^text\/plain/);
      // In tests the process metrics are off; services with metrics of their own show them.
      expect(metrics.text, name).toMatch(/^svc_service_ready\{[^}]*\} 1$/m);
      expect(metrics.text, name).toContain(`svc_build_info{version="${HOST_VERSION}",commit="unknown"`);
      if (name === "job-reaper") expect(metrics.text).toMatch(/^# HELP svc_jobs_queue_depth /m);
      if (name === "webhook-dispatcher") expect(metrics.text).toMatch(/^# HELP svc_jobs_/m);
      if (promtool) {
        const dir = mkdtempSync(join(tmpdir(), "svc-metrics-"));
        writeFileSync(join(dir, "metrics.txt"), metrics.text);
        const check = spawnSync("sh", ["-c", `promtool check metrics < ${join(dir, "metrics.txt")}`], {
          encoding: "utf8",
        });
        // promtool exits 1 on lint remarks too; errors of the format say "error".
        expect(`${check.stdout}${check.stderr}`, name).not.toMatch(
          /error while linting|text format parsing error/,
        );
      }
      expect((await http(`${address(service)}/anything`)).status, name).toBe(404);
    }
  });

  it("each service's readiness turns false when its NATS connection is cut, and true again", async () => {
    await proxy.close();
    for (const { name, service } of services) {
      const status = await eventually(
        () => ready(service),
        (s) => s === 503,
        10_000,
        100,
      );
      expect(status, name).toBe(503);
      const body = (await http(`${address(service)}/ready`)).json<{ down: string[] }>();
      expect(body.down, name).toContain("nats");
      // Liveness does not depend on NATS: a restart would not help.
      expect((await http(`${address(service)}/health`)).status, name).toBe(200);
      // What an alert sees: alive (scraped) but not ready.
      expect((await http(`${address(service)}/metrics`)).text, name).toMatch(
        /^svc_service_ready\{[^}]*\} 0$/m,
      );
    }
    await proxy.open();
    for (const { name, service } of services) {
      const status = await eventually(
        () => ready(service),
        (s) => s === 200,
        20_000,
        200,
      );
      expect(status, name).toBe(200);
      expect((await http(`${address(service)}/metrics`)).text, name).toMatch(
        /^svc_service_ready\{[^}]*\} 1$/m,
      );
    }
  }, 90_000);

  it("answers 503 `draining` from the moment a service is told to stop", async () => {
    const extra = await h.start(jobReaperService, { MANAGEMENT_PORT: "0", MANAGEMENT_HOST: "127.0.0.1" });
    const base = address(extra);
    expect((await http(`${base}/ready`)).status).toBe(200);
    const stopping = extra.stop();
    const during = await http(`${base}/ready`).catch(() => undefined);
    await stopping;
    // Either it answered while draining, or it had already closed; it never said ready.
    if (during !== undefined) expect(during.json()).toMatchObject({ status: "draining" });
    await expect(http(`${base}/health`, { timeoutMs: 1_000 })).rejects.toThrow();
  });
});
