/**
 * `/metrics` is Prometheus text with the gateway's request histogram and, gathered over NATS, the metrics
 * of the services behind it.
 */
import { messageClient, metricsMessages } from "@svc/contracts";
import { enqueue, noopJob } from "@svc/jobs";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { resolverService } from "@svc/service-resolver";
import { afterAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { http } from "./support/http.js";

const h = await createHarness();
afterAll(() => h.stopAll());

describe("GET /metrics", () => {
  it("exposes the request histogram by route and status, and the services' metrics", async () => {
    await h.start(resolverService);
    const reaper = await h.start(jobReaperService);
    await enqueue(reaper.deps.db, noopJob, {}, { workspaceKey: "default" });
    const gateway = await h.start(gatewayService);
    const base = gateway.hooks.httpAddress as string;
    await http(`${base}/workspace/public/resolve`, { headers: { host: "localhost" } });
    await http(`${base}/no/such/route`);

    const response = await http(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers["content-type"]).toMatch(/^text\/plain/);
    const text = response.text;
    expect(text).toMatch(
      /svc_http_request_duration_seconds_count\{[^}]*method="GET"[^}]*route="\/workspace\/public\/resolve"[^}]*status_code="200"[^}]*\} 1/,
    );
    // Unknown URLs share one label value, so a scan cannot blow up the series count.
    expect(text).toMatch(/route="unmatched"[^}]*status_code="404"/);
    expect(text).not.toContain("/no/such/route");
    expect(text).toMatch(/svc_jobs_queue_depth\{[^}]*type="noop"[^}]*status="Pending"[^}]*\} 1/);
    expect(text).toMatch(/svc_gateway_resolve_cache_lookups_total\{[^}]*result="miss"/);
    expect(text).toContain('service="job-reaper"');
    // The public port says which version runs, never which commit (the management
    // ports, which are not public, do).
    expect(text).toMatch(/^svc_build_info\{version="[^"]+"[^}]*\} \d+$/m);
    expect(text).not.toMatch(/commit=/);

    // Fuzz finding: the gateway's histogram (route × method × status) outgrew NATS's payload limit when
    // the gateway answered metrics.collect too. It is scraped over HTTP only; the others still answer.
    const replies = await messageClient(gateway.deps.bus, metricsMessages).requestAll(
      "collect",
      {},
      { maxWaitMs: 1_000, stallMs: 150 },
    );
    expect(replies.map((r) => r.service).sort()).toEqual(["job-reaper", "resolver"]);

    // A second job-reaper reads the same table: the aggregate takes one reading, not the sum of two.
    await h.start(jobReaperService);
    const twice = (await http(`${base}/metrics`)).text;
    expect(twice).toMatch(/svc_jobs_queue_depth\{[^}]*type="noop"[^}]*status="Pending"[^}]*\} 1$/m);
  });
});
