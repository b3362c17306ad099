/**
 * Write routes accept an `Idempotency-Key` (the IETF draft's semantics): the same key and
 * request replays the first answer without running again; the same key with another request is a 422; an
 * error answer is replayed too; keys belong to their caller.
 */
import { createHash } from "node:crypto";

import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
let base: string;
let operator: string;
const API_KEYS = ["first-break-glass-key-0123456789abcdef", "second-break-glass-key-0123456789abcdef"];
beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__EnableBootstrapApiKeys: "true",
    BackendHost__ApiKeys__0: API_KEYS[0] as string,
    BackendHost__ApiKeys__1: API_KEYS[1] as string,
  };
  await h.start(rbacService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"], sub: "op-1" });
});
afterAll(() => h.stopAll());

const api = bearerApi(() => base);
const createUser = (body: unknown, key?: string, token = operator) =>
  api("POST", "/api/users", token, body, { headers: key === undefined ? {} : { "idempotency-key": key } });

describe("Idempotency-Key", () => {
  it("replays the first answer for a retry with the same key and request, and runs it once", async () => {
    const body = { userName: "idem-user", password: "long-enough-password" };
    const first = await createUser(body, "key-1");
    expect(first.status).toBe(201);
    const retry = await createUser(body, "key-1");
    expect(retry.status).toBe(201);
    expect(retry.headers["idempotency-replayed"]).toBe("true");
    expect(retry.json()).toEqual(first.json());
    const rows = await h.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM rbac.users WHERE user_name = 'idem-user'",
    );
    expect(rows[0]?.n).toBe(1);
    // Without a key the same request runs again: the name is taken.
    expect((await createUser(body)).status).toBe(409);
  });

  it("answers 422 for the same key with another request, and replays an error answer", async () => {
    await createUser({ userName: "idem-two", password: "long-enough-password" }, "key-2");
    const other = await createUser({ userName: "idem-three", password: "long-enough-password" }, "key-2");
    expect(other.status).toBe(422);
    expect(other.json()).toMatchObject({ code: "SVC_IDEMPOTENCY_KEY_REUSED" });
    // A conflict is a final answer: kept and replayed.
    const taken = await createUser({ userName: "idem-two", password: "long-enough-password" }, "key-3");
    expect(taken.status).toBe(409);
    const again = await createUser({ userName: "idem-two", password: "long-enough-password" }, "key-3");
    expect(again.status).toBe(409);
    expect(again.headers["idempotency-replayed"]).toBe("true");
  });

  it("keeps keys per caller and refuses malformed keys", async () => {
    const someoneElse = await mintToken({ scope: "platform", roles: ["superadmin"], sub: "op-2" });
    const mine = await createUser({ userName: "idem-four", password: "long-enough-password" }, "shared-key");
    expect(mine.status).toBe(201);
    // Another caller's request under the same key is its own: it runs (and finds the name taken).
    const theirs = await createUser(
      { userName: "idem-four", password: "long-enough-password" },
      "shared-key",
      someoneElse,
    );
    expect(theirs.status).toBe(409);
    expect(theirs.headers["idempotency-replayed"]).toBeUndefined();
    const bad = await createUser({ userName: "idem-five", password: "long-enough-password" }, "has space");
    expect(bad.status).toBe(400);
  });

  it("gives each API key its own keys", async () => {
    const grant = await api("PUT", "/api/rbac/roles/host.api", operator, { permissions: ["user.create"] });
    expect(grant.status, grant.text).toBeLessThan(300);
    const withKey = (apiKey: string) =>
      api(
        "POST",
        "/api/users",
        null,
        { userName: "idem-api", password: "long-enough-password" },
        { headers: { "x-svc-api-key": apiKey, "idempotency-key": "break-glass-1" } },
      );
    expect((await withKey(API_KEYS[0] as string)).status).toBe(201);
    // The other key's request under the same Idempotency-Key runs (and finds the name taken).
    const other = await withKey(API_KEYS[1] as string);
    expect(other.status).toBe(409);
    expect(other.headers["idempotency-replayed"]).toBeUndefined();
  });

  it("keeps no copy of a secret shown once: a retry of the write gets 409 secret-shown-once, even after NATS lost the keys", async () => {
    const make = () =>
      api(
        "POST",
        "/api/security/integrations",
        operator,
        { name: "crm" },
        { headers: { "idempotency-key": "sk-1" } },
      );
    const first = await make();
    expect(first.status, first.text).toBe(201);
    const secret = first.json<{ clientSecret: string }>().clientSecret;
    const shownOnce = (answer: Awaited<ReturnType<typeof make>>) => {
      expect(answer.status, answer.text).toBe(409);
      expect(answer.text).not.toContain(secret);
      expect(answer.json()).toMatchObject({ rule: "secret-shown-once", doneWithStatus: 201 });
    };
    const retry = await make();
    shownOnce(retry);
    expect(retry.headers["idempotency-replayed"]).toBe("true");
    // Neither the gateway's key store nor rbac's outcomes hold it.
    const nc = await connect(h.natsOptions());
    try {
      const bucket = await new Kvm(nc).open(`${h.env.SVC_SUBJECT_PREFIX as string}_idempotency`);
      const values: string[] = [];
      for await (const k of await bucket.keys()) values.push((await bucket.get(k))?.string() ?? "");
      expect(values.length).toBeGreaterThan(0);
      expect(values.join("\n")).not.toContain(secret);
      // NATS lost the keys: the retry reaches rbac, whose outcome of the write answers the same.
      await (
        await jetstreamManager(nc)
      ).streams.purge(`KV_${h.env.SVC_SUBJECT_PREFIX as string}_idempotency`);
    } finally {
      await nc.close();
    }
    const outcomes = await h.sql<{ reply: string | null }>(
      "SELECT reply::text AS reply FROM rbac.idempotency_outcomes",
    );
    expect(outcomes.map((o) => o.reply ?? "").join("\n")).not.toContain(secret);
    shownOnce(await make());
    const made = await h.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM rbac.integrations WHERE name = 'crm'",
    );
    expect(made[0]?.n).toBe(1);
  });

  it("keeps a request's digest that its body alone cannot reproduce: a password in it cannot be guessed offline", async () => {
    const body = { userName: "digest-user", password: "a guessable password" };
    expect((await createUser(body, "digest-key")).status).toBe(201);
    const bodyOnly = createHash("sha256")
      .update(JSON.stringify({ method: "POST", path: "/api/users", query: {}, body }))
      .digest("base64url");
    const kept = await h.sql<{ fingerprint: string }>("SELECT fingerprint FROM rbac.idempotency_outcomes");
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.map((k) => k.fingerprint)).not.toContain(bodyOnly);
  });

  it("answers 503 when the key store cannot be read (NATS lost the bucket), never a 500, and runs nothing", async () => {
    const nc = await connect(h.natsOptions());
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(`KV_${h.env.SVC_SUBJECT_PREFIX as string}_idempotency`);
      const answer = await createUser(
        { userName: "while-keys-are-gone", password: "long enough password" },
        "k-503",
      );
      expect(answer.status, answer.text).toBe(503);
      expect(answer.headers["retry-after"]).toBe("5");
      expect(answer.json()).toMatchObject({ code: "SVC_SERVICE_UNAVAILABLE" });
      const made = await h.sql(`SELECT 1 FROM rbac.users WHERE user_name = 'while-keys-are-gone'`);
      expect(made).toEqual([]);
    } finally {
      await nc.close();
    }
  }, 30_000);
});
