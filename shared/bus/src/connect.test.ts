import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, describe, expect, it } from "vitest";

import { coalesceWrites, natsAuthOptions } from "./connect.js";

const dir = mkdtempSync(join(tmpdir(), "svc-tls-options-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the TLS options given to nats.js", () => {
  it("read the CA, certificate and key each time the transport reads them, so a rotated file applies at the next connect", () => {
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const tls = natsAuthOptions({
      tls: {
        caFile: file("ca.pem", "first CA"),
        certFile: file("client.pem", "first cert"),
        keyFile: file("client.key", "first key"),
        serverName: "nats.test",
      },
    }).tls as Record<string, unknown>;
    // The transport copies every field into Node's tls.connect options at each (re)connect.
    expect({ ...tls }).toEqual({
      ca: "first CA",
      cert: "first cert",
      key: "first key",
      servername: "nats.test",
    });
    file("ca.pem", "rotated CA");
    file("client.pem", "rotated cert");
    file("client.key", "rotated key");
    expect({ ...tls }).toEqual({
      ca: "rotated CA",
      cert: "rotated cert",
      key: "rotated key",
      servername: "nats.test",
    });
  });

  it("name no file the transport would read itself (on libuv's thread pool), and are absent without TLS", () => {
    const tls = natsAuthOptions({ tls: { caFile: join(dir, "ca.pem") } }).tls as Record<string, unknown>;
    expect(Object.keys(tls)).toEqual(["ca"]);
    expect(natsAuthOptions({ token: "t" }).tls).toBeUndefined();
  });
});

describe("coalescing writes", () => {
  it("changes nothing and says so when the connection is not shaped like nats.js's", () => {
    const flushPending = () => undefined;
    const foreign = { protocol: { flushPending, close: async () => undefined } };
    expect(coalesceWrites(foreign as unknown as NatsConnection)).toBe(false);
    expect(foreign.protocol.flushPending).toBe(flushPending);
    expect(coalesceWrites({} as NatsConnection)).toBe(false);
  });
});
