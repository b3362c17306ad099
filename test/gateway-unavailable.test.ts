/**
 * A service that does not answer gives a 503 or 504 problem document quickly, never a hang.
 */
import { connect } from "@nats-io/transport-node";
import { Header } from "@svc/bus";
import { gatewayService } from "@svc/service-gateway";
import { resolverService } from "@svc/service-resolver";
import { afterAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";

const h = await createHarness();
const TIMEOUT_MS = 400;
const gateway = await h.start(gatewayService, {
  BackendHost__ResolveCacheTtlMs: "0",
  BackendHost__RequestTimeoutMs: String(TIMEOUT_MS),
});
const base = gateway.hooks.httpAddress as string;

afterAll(() => h.stopAll());

describe("the resolver is missing or hung", () => {
  it("answers 503 problem at once when no resolver runs, and 200 once one starts", async () => {
    const started = Date.now();
    const response = await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } });
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
    expect(response.status).toBe(503);
    expect(response.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(response.json()).toMatchObject({
      type: "/problems/service-unavailable",
      title: "Service Unavailable",
      status: 503,
      code: "SVC_SERVICE_UNAVAILABLE",
      service: "resolver",
    });

    const resolver = await h.start(resolverService);
    const ok = await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } });
    expect(ok.json()).toEqual({ resolved: true, workspaceKey: "default" });

    await resolver.stop();
    const again = await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } });
    expect(again.status).toBe(503);
  });

  it("answers 504 problem within the request timeout when the resolver hangs", async () => {
    // A real NATS subscriber on the resolver's subject that receives requests and never answers.
    const nc = await connect(h.natsOptions());
    const seen: string[] = [];
    nc.subscribe(`${h.env.SVC_SUBJECT_PREFIX}.resolver.workspace.resolve`, {
      queue: "resolver",
      callback: (_err, msg) => {
        seen.push(msg.headers?.get(Header.Deadline) ?? "");
      },
    });
    await nc.flush();
    try {
      const started = Date.now();
      const response = await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } });
      const elapsed = Date.now() - started;
      expect(response.status).toBe(504);
      expect(response.json()).toMatchObject({ status: 504, code: "SVC_TIMEOUT", service: "resolver" });
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(elapsed).toBeLessThan(TIMEOUT_MS + 1_000);
      // The deadline travelled with the request: about now + timeout when it was sent.
      expect(seen).toHaveLength(1);
      const deadline = Number(seen[0]);
      expect(deadline).toBeGreaterThan(started);
      expect(deadline).toBeLessThanOrEqual(started + TIMEOUT_MS + 100);
    } finally {
      await nc.close();
    }
  });
});
