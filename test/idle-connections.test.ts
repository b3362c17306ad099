/**
 * Connections that never send a byte cannot take the gateway down. One client opening
 * more sockets than the process has file descriptors (12,000 here; the limit is 20,000 and the test's
 * process holds both ends) is cut off at its cap as the sockets open, and sockets under the cap that stay
 * silent are closed after the headers timeout; meanwhile `/health` answers another client. Before the cap
 * and the timeouts, the same sockets used up the descriptors and `/health` failed.
 */
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { connect, type Socket } from "node:net";

import { gatewayService } from "@svc/service-gateway";
import { afterAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";

const h = await createHarness();
const base = (
  await h.start(gatewayService, {
    BackendHost__MaxConnectionsPerClient: "100",
    BackendHost__HeadersTimeoutMs: "2000",
  })
).hooks.httpAddress as string;
const port = Number(new URL(base).port);
const opened = new Set<Socket>();

afterAll(async () => {
  for (const socket of opened) socket.destroy();
  await h.stopAll();
});

/**
 * Handshakes the kernel dropped at a full accept queue on this machine so far (TcpExt ListenDrops): a
 * socket whose handshake was dropped looks connected to its client, but no process ever holds it.
 */
function listenDrops(): number {
  const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
  const [names, values] = lines.filter((l) => l.startsWith("TcpExt:")).map((l) => l.split(/\s+/));
  const at = names?.indexOf("ListenDrops") ?? -1;
  return at < 0 ? 0 : Number(values?.[at] ?? 0);
}

/** Opens `count` silent sockets from `localAddress`; a socket the server closes is released at once. */
async function silentSockets(count: number, localAddress: string): Promise<{ closedByServer: () => number }> {
  let closed = 0;
  for (let i = 0; i < count; i += 500) {
    await Promise.all(
      Array.from(
        { length: Math.min(500, count - i) },
        () =>
          new Promise<void>((resolve) => {
            const socket = connect({ port, host: "127.0.0.1", localAddress });
            opened.add(socket);
            socket.on("error", () => undefined);
            socket.once("connect", () => resolve());
            socket.once("close", () => {
              opened.delete(socket);
              closed++;
              resolve();
            });
          }),
      ),
    );
  }
  return { closedByServer: () => closed };
}

/** GET `path` from another client address: its status and body. */
function get(path: string, localAddress: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, localAddress, timeout: 5_000 }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`${path} did not answer within 5 s`)));
    req.on("error", reject);
    req.end();
  });
}
const health = async (localAddress: string) => (await get("/health", localAddress)).status;

describe("idle connections", () => {
  it("silent sockets under the cap are closed after the headers timeout", async () => {
    const clients = ["127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"];
    // Runs before the flood below: that flood overflows the listener's accept queue thousands of times,
    // and the kernel keeps re-offering the dropped handshakes for half a minute after it. A socket of this
    // test dropped among them stays unseen by the gateway past the deadline (CI runs saw 491 and 493 of 500
    // closed when this test ran second; `nstat` shows no overflow when it runs alone).
    const dropsBefore = listenDrops();
    const groups: Array<{ closedByServer: () => number }> = [];
    for (const address of clients) groups.push(await silentSockets(100, address));
    const closed = () => groups.reduce((sum, g) => sum + g.closedByServer(), 0);
    expect(closed()).toBe(0);
    expect(await health("127.0.0.2")).toBe(200);
    // Each is closed about 2 s after the gateway accepts it. On a loaded machine a handshake's last ACK can
    // still be lost (a fresh CI run saw 499 of 500 closed after 10 s); the kernel re-offers it with the
    // SYN-ACK retransmissions, the last about 31 s later, and the gateway closes it 2 s after that: so wait
    // up to 50 s (a CI run saw 498 of 500 closed after 35 s; 3 s when all goes well).
    const until = Date.now() + 50_000;
    while (closed() < 500 && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
    // Every socket the gateway was handed is closed. One whose handshake the kernel dropped at a full
    // accept queue (machine-wide count, so other tests' drops widen it, never narrow it) was never the
    // gateway's: a loaded CI run saw 496 of 500 closed with drops counted meanwhile.
    const dropped = listenDrops() - dropsBefore;
    expect(dropped, "the kernel dropped most handshakes: nothing was tested").toBeLessThan(50);
    expect(closed()).toBeGreaterThanOrEqual(500 - dropped);
  }, 75_000);

  it("one client's 12,000 silent sockets are cut at its cap; /health keeps answering", async () => {
    const flood = await silentSockets(12_000, "127.0.0.1");
    expect(await health("127.0.0.2")).toBe(200);
    // All but the client's last 100 were closed by the gateway.
    const until = Date.now() + 5_000;
    while (flood.closedByServer() < 12_000 - 100 && Date.now() < until)
      await new Promise((r) => setTimeout(r, 100));
    expect(flood.closedByServer()).toBeGreaterThanOrEqual(12_000 - 100);
    // Asked from another address: 127.0.0.1 still holds its 100 until the headers timeout closes them.
    const metrics = (await get("/metrics", "127.0.0.2")).body;
    const refused = Number(/^svc_gateway_connections_refused_total(?:\{[^}]*\})? (\d+)/m.exec(metrics)?.[1]);
    // Most at the cap as they opened; the others, under the cap, by the headers timeout (which frees
    // the cap's places every 2 s while the flood goes on).
    expect(refused).toBeGreaterThan(9_000);
  }, 60_000);
});
