import { Writable } from "node:stream";

import pg from "pg";
import { describe, expect, it } from "vitest";

import { createLogger } from "./logger.js";

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, log: createLogger("t", "info", stream) };
}

describe("a secret in a log line", () => {
  it("never logs the row data a PostgreSQL error quotes, at any depth of cause", () => {
    const { lines, log } = capture();
    const dbError = new pg.DatabaseError(
      'new row for relation "subscriptions" violates check constraint "x"',
      0,
      "error",
    );
    dbError.detail = "Failing row contains (id, v1.sealed-secret-bytes, https://example.com)";
    dbError.where = "SQL function quoting sealed-secret-bytes";
    dbError.constraint = "subscriptions_target_url_check";
    log.error({ err: dbError }, "handler failed");
    log.error({ err: new Error("wrapped", { cause: dbError }) }, "handler failed");
    log.warn({ error: dbError }, "also under 'error'");
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      expect(line).not.toContain("sealed-secret-bytes");
      expect(line).not.toContain("Failing row");
    }
    // What helps an operator stays: the message and the constraint's name.
    expect(lines[0]).toContain("violates check constraint");
    expect(lines[0]).toContain("subscriptions_target_url_check");
  });

  it("redacts credentials by name at the top and two levels down, and credential headers", () => {
    const { lines, log } = capture();
    log.info(
      {
        password: "pw-top-secret",
        token: "tok-top-secret",
        body: { clientSecret: "cs-one-secret", user: { newPassword: "pw-two-secret" } },
        config: { nats: { creds: "creds-two-secret", seed: "SUAseed-two-secret" } },
        req: { headers: { authorization: "Bearer jwt-secret", cookie: "sid=cookie-secret", host: "a.test" } },
        upstream: { headers: { "x-svc-api-key": "key-secret", "content-type": "application/json" } },
        userName: "alice",
      },
      "a line with secrets",
    );
    expect(lines).toHaveLength(1);
    const line = lines[0] ?? "";
    for (const value of [
      "top-secret",
      "one-secret",
      "two-secret",
      "jwt-secret",
      "cookie-secret",
      "key-secret",
    ])
      expect(line).not.toContain(value);
    const parsed = JSON.parse(line) as Record<string, unknown>;
    // What is not a credential stays.
    expect(parsed).toMatchObject({
      userName: "alice",
      password: "[redacted]",
      body: { clientSecret: "[redacted]", user: { newPassword: "[redacted]" } },
      req: { headers: { authorization: "[redacted]", cookie: "[redacted]", host: "a.test" } },
      upstream: { headers: { "x-svc-api-key": "[redacted]", "content-type": "application/json" } },
    });
  });
});
