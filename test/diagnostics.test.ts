/**
 * The diagnostics recorder. One recording at a time records, in every service, the
 * database statements (with their literals) and the NATS requests with timings, and stops by itself at its
 * time or entry limit; only `diagnostics.record` reads it.
 */
import { connectNats } from "@svc/bus";
import { createLogger } from "@svc/observability";
import { diagnosticsSubject } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { rbacService } from "@svc/service-rbac";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
let base: string;
let operator: string;

const api = bearerApi(() => base);

interface Recording {
  id: string;
  status: "recording" | "stopped";
  stopReason: string | null;
  entryCount: number;
  maxEntries: number;
  items: Array<{ kind: string; service: string; text: string; durationMs: number; outcome: string }>;
  nextCursor: string | null;
}

const recording = async () =>
  (await api("GET", "/api/diagnostics/recorder?limit=1000", operator)).json<Recording>();

/** A sign-in attempt: rbac looks the name up in PostgreSQL, the gateway asks rbac over NATS. */
const signIn = (userName: string) =>
  api("POST", "/api/auth/login", null, { username: userName, password: "not the password at all" });

beforeAll(async () => {
  const env = {
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__RateLimitAuthPerAccountPerMinute: "0",
  };
  await h.start(rbacService, env);
  await h.start(jobReaperService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});
afterAll(() => h.stopAll());

describe("the diagnostics recorder", () => {
  it("answers 404 before the first recording", async () => {
    const res = await api("GET", "/api/diagnostics/recorder", operator);
    expect(res.status).toBe(404);
    expect(res.headers["content-type"]).toContain("application/problem+json");
  });

  it("records statements with their literals and requests with timings across services, then stops by itself", async () => {
    const started = await api("POST", "/api/diagnostics/recorder/start", operator, {
      maxDurationSeconds: 3,
      maxEntries: 5_000,
    });
    expect(started.status).toBe(201);
    expect(started.json<Recording>()).toMatchObject({
      status: "recording",
      maxEntries: 5_000,
      stopReason: null,
    });

    // One at a time.
    const second = await api("POST", "/api/diagnostics/recorder/start", operator, {});
    expect(second.status).toBe(409);
    expect(second.headers["content-type"]).toContain("application/problem+json");

    // The taps see the new recording within moments; then a sign-in leaves its traces.
    const traced = await eventually(
      async () => {
        await signIn("diag-probe-user");
        return recording();
      },
      (r) =>
        r.items.some((e) => e.kind === "database" && e.text.includes("'diag-probe-user'")) &&
        r.items.some((e) => e.kind === "nats" && e.service === "gateway" && e.text.includes(".rbac.")),
      5_000,
      100,
    );
    const statement = traced.items.find((e) => e.kind === "database" && e.text.includes("'diag-probe-user'"));
    expect(statement).toMatchObject({ service: "rbac", outcome: "ok" });
    expect(statement?.text).toMatch(/rbac\.users/);
    expect(statement?.text).not.toMatch(/\$1\b/);
    expect(statement?.durationMs).toBeGreaterThan(0);
    const request = traced.items.find(
      (e) => e.kind === "nats" && e.service === "gateway" && e.text.includes(".rbac."),
    );
    expect(request?.text).toContain(`${h.env.SVC_SUBJECT_PREFIX}.rbac.`);
    expect(request?.durationMs).toBeGreaterThan(0);

    // Only diagnostics.record reads it.
    const reader = await mintToken({ scope: "platform", permissions: ["job.read", "user.read"] });
    expect((await api("GET", "/api/diagnostics/recorder", reader)).status).toBe(403);

    // It stops by itself when its time is up; later work adds nothing.
    const stopped = await eventually(recording, (r) => r.status === "stopped", 8_000, 200);
    expect(stopped.stopReason).toBe("time");
    const count = (await recording()).entryCount;
    await signIn("diag-after-the-end");
    // A marker entry published after the sign-in answered: rbac publishes an entry before its reply, on
    // one connection, so had it recorded the sign-in, that entry would be stored before the marker.
    const nc = await connectNats({
      url: h.env.NATS_URL as string,
      auth: h.natsAuth,
      name: "diagnostics marker",
      logger: createLogger("t", "silent"),
    });
    nc.publish(
      diagnosticsSubject(h.env.SVC_SUBJECT_PREFIX as string),
      JSON.stringify({
        recordingId: stopped.id,
        atUtc: new Date().toISOString(),
        service: "test",
        instance: "test",
        kind: "nats",
        text: "marker",
        durationMs: 1,
        outcome: "ok",
      }),
    );
    await nc.drain();
    const after = await eventually(recording, (r) => r.items.some((e) => e.text === "marker"));
    expect(after.entryCount).toBe(count + 1);
    expect(after.items.some((e) => e.text.includes("diag-after-the-end"))).toBe(false);
  });

  it("stops by itself at its entry limit, and pages its entries", async () => {
    const started = await api("POST", "/api/diagnostics/recorder/start", operator, {
      maxDurationSeconds: 60,
      maxEntries: 6,
    });
    expect(started.status).toBe(201);
    const full = await eventually(
      async () => {
        await signIn("diag-filler");
        return recording();
      },
      (r) => r.status === "stopped",
      8_000,
      100,
    );
    expect(full).toMatchObject({ status: "stopped", stopReason: "entries", entryCount: 6 });
    const first = (await api("GET", "/api/diagnostics/recorder?limit=4", operator)).json<Recording>();
    expect(first.items).toHaveLength(4);
    expect(first.nextCursor).not.toBeNull();
    const rest = (
      await api("GET", `/api/diagnostics/recorder?limit=4&cursor=${first.nextCursor}`, operator)
    ).json<Recording>();
    expect(rest.items).toHaveLength(2);
    expect(rest.nextCursor).toBeNull();
  });

  it("stops on request, and refuses a bad start", async () => {
    const started = await api("POST", "/api/diagnostics/recorder/start", operator, { kinds: ["nats"] });
    expect(started.status).toBe(201);
    const stopped = await api("POST", "/api/diagnostics/recorder/stop", operator);
    expect(stopped.status).toBe(200);
    expect(stopped.json<Recording>()).toMatchObject({ status: "stopped", stopReason: "operator" });
    // Stopping again changes nothing.
    expect((await api("POST", "/api/diagnostics/recorder/stop", operator)).json<Recording>().stopReason).toBe(
      "operator",
    );
    const bad = await api("POST", "/api/diagnostics/recorder/start", operator, {
      maxDurationSeconds: 100_000,
      maxEntries: 0,
      kinds: ["files"],
    });
    expect(bad.status).toBe(400);
    const fields = bad.json<{ errors: Array<{ field: string }> }>().errors.map((e) => e.field);
    expect(fields).toEqual(
      expect.arrayContaining(["/body/maxDurationSeconds", "/body/maxEntries", "/body/kinds/0"]),
    );
  });
});
