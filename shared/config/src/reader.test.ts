/**
 * A setting that fails its check is named with what was wrong, and its value shown only when it cannot
 * hold a secret: a database address whose password broke its parsing must not reach the log.
 */
import { describe, expect, it } from "vitest";

import { ConfigError, parseConfig } from "./config.js";

const refusal = (env: Record<string, string>) => {
  try {
    parseConfig({ NODE_ENV: "test", ...env }, { tool: true });
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error("the configuration was accepted");
};

describe("a refused setting", () => {
  it("names an address that fails its check without showing it: it may hold credentials", () => {
    // A base64 password with a slash and a hash: `new URL` throws on it.
    const message = refusal({ DATABASE_URL: "postgres://svc:pa/ss#w0rd@db.internal:5432/svc" });
    expect(message).toContain("DATABASE_URL");
    expect(message).not.toContain("pa/ss");
    expect(message).not.toContain("w0rd");
    expect(message).toMatch(/characters, not shown/);
  });

  it("still shows a value that cannot be a secret, so the operator sees the mistake", () => {
    expect(refusal({ LOG_LEVEL: "loud" })).toContain('"loud"');
  });
});
