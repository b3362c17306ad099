/**
 * `/health` checks nothing; `/ready` turns 503 within 5 s of PostgreSQL becoming unreachable,
 * naming it, and 200 again when it returns.
 */
import { Agent, request as httpRequest } from "node:http";

import { gatewayService } from "@svc/service-gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";
import { TcpProxy } from "./support/tcp-proxy.js";

const h = await createHarness();
const target = new URL(h.db.url);
const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
let base: string;

beforeAll(async () => {
  const port = await proxy.open();
  const viaProxy = new URL(h.db.url);
  viaProxy.port = String(port);
  const gateway = await h.start(gatewayService, { DATABASE_URL: viaProxy.toString() });
  base = gateway.hooks.httpAddress as string;
});

afterAll(async () => {
  await proxy.open().catch(() => undefined);
  await h.stopAll();
  await proxy.close();
});

async function waitForStatus(path: string, status: number, withinMs: number) {
  const started = Date.now();
  for (;;) {
    const response = await http(`${base}${path}`);
    if (response.status === status) return { response, elapsedMs: Date.now() - started };
    if (Date.now() - started > withinMs)
      throw new Error(`${path} still ${response.status} after ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("health and readiness", () => {
  it("is live and ready while PostgreSQL and NATS are up", async () => {
    expect((await http(`${base}/health`)).status).toBe(200);
    const ready = await http(`${base}/ready`);
    expect(ready.status).toBe(200);
    expect(ready.json()).toEqual({
      status: "ready",
      checks: { postgres: "up", nats: "up" },
      // On a single server every stream has its one copy.
      storage: { status: "ok", short: [] },
    });
  });

  it("turns 503 within 5 s when PostgreSQL becomes unreachable, and 200 when it returns", async () => {
    await proxy.close();
    const down = await waitForStatus("/ready", 503, 5_000);
    expect(down.elapsedMs).toBeLessThan(5_000);
    expect(down.response.json()).toEqual({
      status: "unavailable",
      checks: { postgres: "down", nats: "up" },
      down: ["postgres"],
      storage: { status: "ok", short: [] },
    });
    // Liveness does not depend on the database.
    expect((await http(`${base}/health`)).status).toBe(200);

    await proxy.open();
    await waitForStatus("/ready", 200, 10_000);
  });
});

describe("shutdown drains", () => {
  it("on stop, /ready turns 503 at once while the listener keeps serving for the drain delay, then closes", async () => {
    const gateway = await h.start(gatewayService, { SHUTDOWN_DRAIN_DELAY_MS: "1500" });
    const address = gateway.hooks.httpAddress as string;
    expect((await http(`${address}/ready`)).status).toBe(200);
    const stopped = gateway.stop();
    const ready = await http(`${address}/ready`);
    expect(ready.status).toBe(503);
    expect(ready.json()).toMatchObject({ status: "draining" });
    // Still serving meanwhile: a load balancer that has not noticed yet loses nothing.
    expect((await http(`${address}/health`)).status).toBe(200);
    await stopped;
    await expect(http(`${address}/health`, { timeoutMs: 2_000 })).rejects.toThrow();
  });

  it("answers Connection: close while draining, so no kept-alive connection is reset at the close", async () => {
    const gateway = await h.start(gatewayService, { SHUTDOWN_DRAIN_DELAY_MS: "1500" });
    const url = new URL(`${gateway.hooks.httpAddress as string}/health`);
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    const get = () =>
      new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const request = httpRequest(url, { agent }, (response) => {
          response.resume();
          response.on("end", () =>
            resolve({ status: response.statusCode ?? 0, connection: response.headers.connection }),
          );
        });
        request.on("error", reject);
        request.end();
      });
    try {
      expect((await Promise.all([get(), get(), get(), get()])).map((r) => r.connection)).toEqual(
        Array(4).fill("keep-alive"),
      );
      const stopped = gateway.stop();
      // Clients keep sending, four at a time, for most of the drain (a load balancer stops sending new
      // connections once /ready is 503; the ones it holds are what the close must not cut).
      const errors: string[] = [];
      const answers: Array<string | undefined> = [];
      const until = Date.now() + 1_000;
      while (Date.now() < until) {
        const outcomes = await Promise.allSettled([get(), get(), get(), get()]);
        for (const o of outcomes) {
          if (o.status === "fulfilled") answers.push(o.value.connection);
          else errors.push(String((o.reason as Error).message));
        }
      }
      expect(errors).toEqual([]);
      expect(answers.length).toBeGreaterThan(0);
      expect(new Set(answers)).toEqual(new Set(["close"]));
      // No kept-alive connection is left open for the close to reset.
      expect(Object.values(agent.freeSockets).flat()).toEqual([]);
      await stopped;
    } finally {
      agent.destroy();
    }
  });
});
