import { describe, expect, it } from "vitest";

import { clientAddress, parseTrustedProxies } from "./rate-limiter.js";

const trusted = parseTrustedProxies(["10.0.0.0/8", "127.0.0.1"]);

describe("clientAddress", () => {
  it("ignores X-Forwarded-For from an untrusted peer", () => {
    expect(clientAddress("203.0.113.5", "198.51.100.1", trusted)).toBe("203.0.113.5");
  });
  it("takes the client the trusted proxies vouch for, skipping them from the right", () => {
    expect(clientAddress("127.0.0.1", "198.51.100.1", trusted)).toBe("198.51.100.1");
    expect(clientAddress("10.0.0.2", "198.51.100.1, 10.0.0.9", trusted)).toBe("198.51.100.1");
  });
  it("cannot be steered by addresses the client put in front", () => {
    expect(clientAddress("10.0.0.2", "1.2.3.4, 5.6.7.8, 198.51.100.1", trusted)).toBe("198.51.100.1");
  });
  it("maps IPv4-mapped IPv6 peers", () => {
    expect(clientAddress("::ffff:127.0.0.1", "198.51.100.1", trusted)).toBe("198.51.100.1");
  });
});
