/**
 * Issue 8, point 12: a short fuzz in CI. Requests generated from the gateway's OpenAPI description and the
 * public routes, valid and mutated, for every kind of caller, against the whole stack on real NATS and
 * PostgreSQL: no 5xx but a documented 503, no hang over 5 s, every error a problem document. `make fuzz`
 * runs the same fuzzer longer, with a new seed each time. FUZZ_SEED repeats a run.
 */
import { CORE_PERMISSION_KEYS } from "@svc/access";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, describe, expect, it } from "vitest";

import { formatReport, fuzzCallers, runFuzz } from "./support/fuzz.js";
import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
afterAll(() => h.stopAll());
const API_KEY = "fuzz-test-api-key-0123456789";

describe("issue 8, point 12: the fuzz harness, short run", () => {
  it("answers generated and mutated requests without 5xx, hangs or non-problem errors", async () => {
    const env = {
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__RateLimitAuthPerMinute: "0",
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
    const openapi = (await http(`${base}/openapi.json`)).json<Parameters<typeof runFuzz>[0]["openapi"]>();
    const seed = Number(process.env.FUZZ_SEED ?? 20261122);
    const report = await runFuzz({
      base,
      openapi,
      callers: await fuzzCallers(mintToken, API_KEY, CORE_PERMISSION_KEYS),
      seed,
      requests: 600,
      seconds: 60,
      concurrency: 4,
    });
    if (report.failures.length > 0) process.stderr.write(`${formatReport(report)}\n`);
    expect(report.sent).toBeGreaterThan(300);
    expect(
      report.failures.map((f) => `${f.failure}: ${f.request.method} ${f.request.path.slice(0, 120)}`),
    ).toEqual([]);
  }, 120_000);
});
