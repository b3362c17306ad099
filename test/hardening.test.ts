/**
 * Regressions of what was seen from outside: reach leaks, input that reached PostgreSQL as a 500, errors
 * that were not problem documents, SSRF targets accepted at create time and the security headers. Then the
 * fuzzer's findings (test/fuzz/), each with the request that showed it.
 */
import { connect } from "node:net";

import { createDb, sql } from "@svc/db";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, http, type HttpResponse } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
let base: string;
let operator: string;

const ALL = [
  "user.create",
  "user.read",
  "user.update",
  "role.read",
  "role.update",
  "job.read",
  "webhook.read",
  "webhook.manage",
  "membership.read",
  "membership.update",
  "integration.read",
  "integration.manage",
  "notification.read",
];

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

function expectProblem(response: HttpResponse, status: number) {
  expect(response.status, response.text).toBe(status);
  expect(response.headers["content-type"]).toMatch(/^application\/problem\+json/);
  const problem = response.json<{ status: number; type: string; title: string; detail: string }>();
  expect(problem.status).toBe(status);
  expect(typeof problem.detail).toBe("string");
  return problem as typeof problem & { errors?: Array<{ field: string }> };
}

/** A request written as raw bytes, for what an HTTP client library would refuse or repair. */
function raw(text: string): Promise<{ status: number; head: string; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let data = "";
    socket.on("data", (c: Buffer) => (data += c.toString()));
    socket.on("end", () => {
      const [head = "", body = ""] = data.split("\r\n\r\n");
      resolve({ status: Number(head.split(" ")[1]), head, body });
    });
    socket.on("error", reject);
    socket.write(text);
  });
}

afterAll(() => h.stopAll());

beforeAll(async () => {
  const env = { BackendHost__RateLimitApiPerMinute: "0" };
  await h.start(rbacService, env);
  await h.start(webhookDispatcherService, env);
  await h.start(jobReaperService, env);
  await h.start(resolverService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", permissions: ALL });
  // Two users, one a member of `default`.
  for (const userName of ["member-one", "outsider-two"]) {
    const created = await asOperator("POST", "/api/users", { userName, password: "long-enough-pass" });
    expect(created.status).toBe(201);
    if (userName === "member-one") {
      const id = created.json<{ id: string }>().id;
      expect((await asOperator("PUT", `/api/workspaces/default/members/${id}`)).status).toBe(201);
    }
  }
});

describe("reach leaks", () => {
  it("a workspace session holding role.read gets 403 from the global role assignments, not every user", async () => {
    const scoped = await mintToken({ scope: "workspace", workspaceKey: "default", permissions: ALL });
    const problem = expectProblem(await api("GET", "/api/rbac/users", scoped), 403);
    expect(problem).toMatchObject({ requiredScope: "platform" });
    expect(JSON.stringify(problem)).not.toContain("outsider-two");
    expectProblem(await api("GET", "/api/rbac/roles", scoped), 403);
  });

  it("a session with no scope claim gets one answer everywhere: 403", async () => {
    const noScope = await mintToken({ permissions: ALL });
    for (const [method, path, body] of [
      ["GET", "/api/rbac/users"],
      ["GET", "/api/users"],
      ["GET", "/api/webhooks"],
      ["GET", "/api/jobs"],
      ["GET", "/api/workspaces/default/members"],
      ["GET", "/api/security/integrations"],
      // An integration made by a session with no scope would be a platform-wide one.
      ["POST", "/api/security/integrations", { name: "x" }],
    ] as const) {
      const problem = expectProblem(await api(method, path, noScope, body), 403);
      expect(JSON.stringify(problem), path).not.toContain("outsider-two");
    }
    const platformMade = await asOperator("POST", "/api/security/integrations", { name: "y" });
    expect(platformMade.status).toBe(201);
  });

  it("a workspace session sees only its own workspace's members among users", async () => {
    const scoped = await mintToken({ scope: "workspace", workspaceKey: "default", permissions: ALL });
    const names = (await api("GET", "/api/users", scoped))
      .json<{ items: Array<{ userName: string }> }>()
      .items.map((u) => u.userName);
    expect(names).toContain("member-one");
    expect(names).not.toContain("outsider-two");
  });

  it("role.read, plugin.execute and config.update do not survive the workspace-admin key filter", async () => {
    const { filterWorkspaceKeys } = await import("@svc/access");
    expect(
      filterWorkspaceKeys(["role.read", "plugin.execute", "config.update", "membership.read"], new Set()),
    ).toEqual(["membership.read"]);
  });
});

describe("input that reached PostgreSQL", () => {
  it("refuses NUL in query, path and body strings with a 400 naming the field", async () => {
    const query = expectProblem(await asOperator("GET", "/api/jobs?workspaceKey=%00"), 400);
    expect(query.errors?.[0]?.field).toBe("/query/workspaceKey");
    const body = expectProblem(
      await asOperator("POST", "/api/users", {
        userName: "nul-user",
        password: "long-enough-pass",
        displayName: "a\u0000b",
      }),
      400,
    );
    expect(body.errors?.[0]?.field).toBe("/body/displayName");
    const surrogate = expectProblem(
      await api(
        "POST",
        "/api/webhooks",
        operator,
        '{"eventName":"user.created","secret":"\\ud800x","targetUrl":"https://example.com"}',
        { contentType: "application/json" },
      ),
      400,
    );
    expect(surrogate.errors?.[0]).toMatchObject({
      field: "/body/secret",
      message: expect.stringMatching(/surrogate/),
    });
    const path = expectProblem(await asOperator("GET", "/api/workspaces/%00/members"), 400);
    expect(path.errors?.[0]?.field).toBe("/params/workspaceKey");
    const resolve = await http(`${base}/workspace/public/resolve?workspaceKey=%00`, {
      headers: { host: "localhost" },
    });
    expectProblem(resolve, 400);
  });

  it("refuses hand-made paging cursors with a 400 naming the cursor", async () => {
    const b64 = (text: string) => Buffer.from(text).toString("base64url");
    for (const [path, cursor] of [
      ["/api/users", b64("u:\u0000")],
      ["/api/users", b64(JSON.stringify(["users", "a\u0000"]))],
      ["/api/jobs", b64("j:99999999999999999999")],
      ["/api/jobs", b64(JSON.stringify(["jobs", "9223372036854775808"]))],
      ["/api/webhooks", b64(JSON.stringify(["webhooks", "2026-01-01T00:00:00.000Z", "not-a-uuid"]))],
      [
        "/api/webhooks",
        b64(
          JSON.stringify(["webhooks", "+275760-09-13T00:00:00.000Z", "00000000-0000-0000-0000-000000000000"]),
        ),
      ],
      ["/api/webhooks", b64(JSON.stringify({ at: "2026-99-99", id: "x" }))],
      ["/api/webhooks", "%%%"],
      // The inbox's read flag was an untyped text value; "abc" reached the query (500).
      [
        "/api/notifications",
        b64(
          JSON.stringify([
            "notifications",
            "abc",
            "2026-01-01T00:00:00.000Z",
            "00000000-0000-0000-0000-000000000000",
          ]),
        ),
      ],
    ] as const) {
      const problem = expectProblem(
        await asOperator("GET", `${path}?cursor=${encodeURIComponent(cursor)}`),
        400,
      );
      expect(problem.errors?.[0]?.field, `${path} ${cursor}`).toBe("/query/cursor");
    }
  });

  it("pages users through the cursor it issued", async () => {
    const first = (await asOperator("GET", "/api/users?limit=1")).json<{
      items: unknown[];
      nextCursor: string;
    }>();
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await asOperator("GET", `/api/users?limit=1&cursor=${first.nextCursor}`);
    expect(second.status).toBe(200);
    expect(second.json<{ items: unknown[] }>().items).toHaveLength(1);
  });

  it("refuses a targetUrl longer than the column holds, naming the field", async () => {
    const problem = expectProblem(
      await asOperator("POST", "/api/webhooks", {
        eventName: "user.created",
        targetUrl: `https://example.com/${"a".repeat(2_100)}`,
        secret: "s",
      }),
      400,
    );
    expect(problem.errors?.map((e) => e.field)).toContain("/body/targetUrl");
  });

  it("refuses JSON nested deeper than the limit, without a stack overflow", async () => {
    const deep = `{"eventName":"user.created","secret":"s","targetUrl":"https://example.com","x":${"[".repeat(10_000)}${"]".repeat(10_000)}}`;
    const problem = expectProblem(
      await api("POST", "/api/webhooks", operator, deep, { contentType: "application/json" }),
      400,
    );
    expect(problem.detail).toMatch(/nested deeper/);
    // The gateway still answers.
    expect((await asOperator("GET", "/api/webhooks")).status).toBe(200);
  });
});

describe("every error is a problem document", () => {
  it("bad %-encoding is a 400 problem", async () => {
    expectProblem(await asOperator("GET", "/api/users/%FF%FE"), 400);
  });

  it("a 5,000-character path parameter is a 414 problem", async () => {
    expectProblem(await asOperator("GET", `/api/users/${"a".repeat(5_000)}`), 414);
  });

  it("a 70 KB query is a 431 problem", async () => {
    const response = await raw(
      `GET /api/users?q=${"a".repeat(70_000)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
    );
    expect(response.status).toBe(431);
    expect(response.head.toLowerCase()).toContain("content-type: application/problem+json");
    expect(JSON.parse(response.body)).toMatchObject({ status: 431, code: "SVC_HEADERS_TOO_LARGE" });
  });

  it("an unsupported method on a known path is 405 with Allow", async () => {
    const response = await asOperator("PATCH", "/api/users");
    expectProblem(response, 405);
    expect(String(response.headers.allow).split(", ").sort()).toEqual(["GET", "HEAD", "POST"]);
    const item = await asOperator("POST", "/api/users/00000000-0000-0000-0000-000000000000");
    expectProblem(item, 405);
    expect(String(item.headers.allow)).toContain("DELETE");
    // An unknown path stays 404.
    expectProblem(await asOperator("PATCH", "/api/nothing-here"), 404);
  });

  it("unparsable JSON and an unsupported media type are problems", async () => {
    expectProblem(
      await api("POST", "/api/webhooks", operator, "{not json", { contentType: "application/json" }),
      400,
    );
    const wrongType = await api("POST", "/api/webhooks", operator, "a,b", { contentType: "text/csv" });
    expectProblem(wrongType, 415);
    // The problem says what the route takes.
    expect(wrongType.json<{ detail: string; accepted: string[] }>()).toMatchObject({
      detail: "Content-Type text/csv is not accepted here; send application/json.",
      accepted: ["application/json"],
    });
  });
});

describe("SSRF targets refused at create time", () => {
  it("refuses literal loopback, metadata and IPv4-compatible IPv6 targets", async () => {
    for (const targetUrl of [
      "http://127.0.0.1/hook",
      "http://169.254.169.254/latest/meta-data",
      "http://[::a9fe:a9fe]/",
      "http://[::7f00:1]/",
      "http://[::ffff:10.0.0.1]/",
      "http://0x7f.1/",
    ]) {
      const problem = expectProblem(
        await asOperator("POST", "/api/webhooks", { eventName: "user.created", targetUrl, secret: "s" }),
        400,
      );
      expect(
        problem.errors?.map((e) => e.field),
        targetUrl,
      ).toEqual(["/body/targetUrl"]);
    }
    // Names are judged when connecting, not here.
    const named = await asOperator("POST", "/api/webhooks", {
      eventName: "user.created",
      targetUrl: "https://hooks.example.com/x",
      secret: "s",
    });
    expect(named.status).toBe(201);
  });
});

describe("headers", () => {
  it("sends nosniff everywhere, no-store on operator answers and WWW-Authenticate on 401", async () => {
    const ok = await asOperator("GET", "/api/users");
    expect(ok.headers["x-content-type-options"]).toBe("nosniff");
    expect(ok.headers["cache-control"]).toBe("no-store");
    const forbidden = await api("GET", "/api/users", await mintToken({ scope: "platform" }));
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers["cache-control"]).toBe("no-store");
    const anonymous = await api("GET", "/api/users", null);
    expectProblem(anonymous, 401);
    expect(anonymous.headers["www-authenticate"]).toBe('Bearer realm="svc"');
    const badToken = await api("GET", "/api/users", "not-a-token");
    expect(badToken.headers["www-authenticate"]).toBe('Bearer realm="svc", error="invalid_token"');
    for (const path of ["/health", "/ready", "/metrics", "/openapi.json", "/nowhere"]) {
      expect((await http(`${base}${path}`)).headers["x-content-type-options"], path).toBe("nosniff");
    }
    const resolve = await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } });
    expect(resolve.headers["x-content-type-options"]).toBe("nosniff");
    expect(
      (await asOperator("GET", `/api/users/${"a".repeat(5_000)}`)).headers["x-content-type-options"],
    ).toBe("nosniff");
  });

  it("sends the whole set of security headers on answers, refusals and unknown paths alike", async () => {
    const answers = [
      await asOperator("GET", "/api/users"),
      await api("GET", "/api/users", null),
      await http(`${base}/nowhere`),
      await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } }),
    ];
    for (const answer of answers) {
      const h = answer.headers;
      expect(h["x-frame-options"]).toBe("SAMEORIGIN");
      expect(h["strict-transport-security"]).toBe("max-age=31536000; includeSubDomains");
      expect(h["referrer-policy"]).toBe("no-referrer");
      expect(h["cross-origin-opener-policy"]).toBe("same-origin");
      expect(h["cross-origin-resource-policy"]).toBe("same-origin");
      expect(String(h["content-security-policy"])).toContain("default-src 'self'");
      expect(String(h["content-security-policy"])).toContain("frame-ancestors 'self'");
      // Left out on purpose: a page served over plain HTTP would have its own scripts fetched over HTTPS.
      expect(String(h["content-security-policy"])).not.toContain("upgrade-insecure-requests");
    }
  });
});

describe("fuzz findings", () => {
  const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 2, applicationName: "fuzz-findings" });
  afterAll(() => db.end());

  async function newUser(userName: string) {
    const created = await asOperator("POST", "/api/users", { userName, password: "long-enough-pass" });
    expect(created.status).toBe(201);
    return created.json<{ id: string }>().id;
  }

  /**
   * Holds the user's row locked while `request` starts, waits until the request's statement waits for the
   * lock, then deletes the user: the request meets a row that was there when it looked and is gone now.
   */
  async function deletedUnderneath(userId: string, request: () => Promise<HttpResponse>, marker: string) {
    let pending: Promise<HttpResponse> | undefined;
    await db.transaction(async (tx) => {
      await tx.query(sql`SELECT 1 FROM rbac.users WHERE id = ${userId} FOR UPDATE`);
      pending = request();
      let waited = false;
      for (let i = 0; i < 500 && !waited; i++) {
        const waiting = await db.maybeOne(sql`
          SELECT 1 AS one FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query LIKE ${`%${marker}%`} LIMIT 1`);
        waited = waiting !== null;
        if (!waited) await new Promise((r) => setTimeout(r, 10));
      }
      expect(waited, `a statement like '${marker}' waiting for the lock`).toBe(true);
      await tx.query(sql`DELETE FROM rbac.users WHERE id = ${userId}`);
    });
    return (pending as Promise<HttpResponse>).then((r) => r);
  }

  it("a user deleted while being updated or (de)activated is 404, not 500", async () => {
    for (const [method, path, body] of [
      ["PUT", "/api/users/{id}", { displayName: "New name" }],
      ["PUT", "/api/users/{id}/activation?isActive=false", undefined],
    ] as const) {
      const id = await newUser(`gone-while-updated-${method}-${body === undefined ? "a" : "u"}`);
      const response = await deletedUnderneath(
        id,
        () => asOperator(method, path.replace("{id}", id), body),
        "UPDATE rbac.users",
      );
      expectProblem(response, 404);
    }
  });

  it("a user deleted while being made a member is 404, not a foreign-key 500", async () => {
    const id = await newUser("gone-while-joining");
    const response = await deletedUnderneath(
      id,
      () => asOperator("PUT", `/api/workspaces/default/members/${id}`),
      "INSERT INTO rbac.memberships",
    );
    expectProblem(response, 404);
  });

  it("resolves a forwarded URI that %-encodes beyond the path limit instead of answering 400", async () => {
    const response = await http(`${base}/workspace/public/resolve`, {
      headers: { host: "localhost", "x-forwarded-uri": `/${"é".repeat(1_000)}` },
    });
    expect(response.status, response.text).toBe(200);
    expect(response.json()).toEqual({ resolved: true, workspaceKey: "default" });
  });

  it("refuses a wrongly typed JSON body value instead of coercing it; query strings are still converted", async () => {
    const id = await newUser("typed-body");
    const problem = expectProblem(await asOperator("PUT", `/api/users/${id}`, { displayName: 1.5 }), 400);
    expect(problem.errors?.map((e) => e.field)).toEqual(["/body/displayName"]);
    const wrong = expectProblem(
      await asOperator("POST", "/api/webhooks", {
        eventName: "user.created",
        targetUrl: "https://hooks.example.com/x",
        secret: "s",
        includeSensitiveData: "true",
      }),
      400,
    );
    expect(wrong.errors?.map((e) => e.field)).toEqual(["/body/includeSensitiveData"]);
    const page = await asOperator("GET", "/api/users?limit=1");
    expect(page.status).toBe(200);
    expect(page.json<{ items: unknown[] }>().items).toHaveLength(1);
  });

  it("answers an HTTP/1.1 request without Host with a 400 problem document", async () => {
    const answer = await raw("GET /health HTTP/1.1\r\nconnection: close\r\n\r\n");
    expect(answer.status).toBe(400);
    expect(answer.head.toLowerCase()).toContain("content-type: application/problem+json");
    expect(JSON.parse(answer.body.replace(/^[0-9a-f]+\r\n/, "").split("\r\n")[0] ?? "")).toMatchObject({
      status: 400,
      detail: expect.stringContaining("Host"),
    });
    // HTTP/1.0 has no Host requirement.
    expect((await raw("GET /health HTTP/1.0\r\n\r\n")).status).toBe(200);
  });
});
