/**
 * A short fuzz in CI. Requests generated from the gateway's OpenAPI description and the
 * public routes, valid and mutated, for every kind of caller, against the whole stack on real NATS and
 * PostgreSQL (the fuzzer is test/fuzz/; `make fuzz` runs it longer, with a new seed each time). FUZZ_SEED
 * repeats a run with another seed; FUZZ_REQUESTS changes its length.
 *
 * Asserted: no 5xx but a documented 503, no hang, no connection closed without an answer, no bypass, no
 * broken route contract, every error a problem document showing no internals.
 */
import { CORE_PERMISSION_KEYS } from "@svc/access";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, describe, expect, inject, it } from "vitest";

import { DEMO, seedDemo } from "../scripts/lib/stack.js";
import { demoConstants, fuzzCallers } from "./fuzz/callers.js";
import type { OpenApi } from "./fuzz/generate.js";
import { type Category, describeRequest, formatReport, type FuzzReport, runFuzz } from "./fuzz/run.js";
import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";

const h = await createHarness();
afterAll(() => h.stopAll());
const API_KEY = "fuzz-test-api-key-0123456789";

const failuresOf = (report: FuzzReport, ...categories: Category[]) =>
  report.failures
    .filter((f) => categories.includes(f.failure as Category))
    .map((f) => `${f.failure}: ${describeRequest(f.request).slice(0, 240)} → ${f.answer.status}`);

describe("the fuzz harness, short run", () => {
  let report: FuzzReport;

  it("sends generated and mutated requests to every kind of route for every kind of caller", async () => {
    await seedDemo(h.db.url, { withAdmin: true });
    const env = {
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__RateLimitAuthPerMinute: "0",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
      BackendHost__EnableBootstrapApiKeys: "true",
      BackendHost__ApiKeys__0: API_KEY,
    };
    for (const service of [
      resolverService,
      rbacService,
      pluginRegistryService,
      webhookDispatcherService,
      jobReaperService,
    ])
      await h.start(service, env);
    const base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    const openapi = (await http(`${base}/openapi.json`)).json<OpenApi>();
    const { callers, badAuth } = await fuzzCallers({
      signingKey: inject("svcTest").jwtSigningKey,
      apiKey: API_KEY,
      allKeys: CORE_PERMISSION_KEYS,
      workspaceKey: DEMO.workspaceKey,
    });
    report = await runFuzz({
      base,
      openapi,
      callers,
      badAuth,
      operator: callers.find((c) => c.name === "superadmin") as (typeof callers)[number],
      constants: demoConstants(DEMO),
      seed: Number(process.env.FUZZ_SEED ?? 20261122),
      requests: Number(process.env.FUZZ_REQUESTS ?? 600),
      seconds: 90,
      // One at a time: no race between the generated requests either, so a seed always gives the same run.
      concurrency: 1,
      rounds: 2,
      // Races depend on timing: `make fuzz` runs them; the suite stays repeatable.
      exclude: ["race"],
    });
    if (report.failures.length > 0) process.stderr.write(`${formatReport(report, 30)}\n`);
    expect(report.sent).toBeGreaterThan(300);
    expect(Object.keys(report.byCaller).length).toBeGreaterThanOrEqual(10);
    expect(report.routes.operator).toBeGreaterThan(90);
  }, 180_000);

  it("answers no request with a 5xx (but a documented 503), none after more than 5 s, none by closing", () => {
    expect(failuresOf(report, "5xx", "hang", "no-answer")).toEqual([]);
  });

  it("lets no caller through that must be refused", () => {
    expect(failuresOf(report, "auth-bypass")).toEqual([]);
  });

  it("keeps every route's contract (the resolve route answers 200 to any forwarded URI)", () => {
    expect(failuresOf(report, "contract")).toEqual([]);
  });

  it("answers every error with a problem document that shows no internals", () => {
    expect(failuresOf(report, "not-problem", "leak", "bad-json-answer")).toEqual([]);
  });
});
