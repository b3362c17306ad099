/**
 * The webhook dispatcher drops, and counts, an event whose name does not belong to who published it
 * (Svc-Event-Source). Each event is published from outside the platform's processes, straight onto
 * JetStream as an external backend (or anything else on the bus) would: a plugin's event into a workspace
 * whose chain lacks the plugin, a core event claimed by a plugin or a flow, an undeclared name. A
 * platform-wide `*` subscription would receive every one of them; it receives only those that belong.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { jetstream } from "@nats-io/jetstream";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { connectNats, EventSource, Header } from "@svc/bus";
import { createLogger } from "@svc/observability";
import type { RunningService } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, installPackage } from "./support/http.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-event-sources-"));
const signer = fixtureSigner();
const receiver = new Receiver();
let base: string;
let operator: string;
let nc: NatsConnection;
let dispatcher: RunningService;
const api = bearerApi(() => base);

const env = {
  ...pluginStackEnv(work, { dev: true, tests: signer }),
  BackendHost__RateLimitApiPerMinute: "0",
  BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  BackendHost__JobPollIntervalMs: "100",
};

/** Publishes onto the events stream with exactly these headers, as any NATS client could. */
async function publish(eventName: string, workspaceKey: string | null, source: string | null, n: number) {
  const h2 = natsHeaders();
  if (workspaceKey !== null) h2.set(Header.WorkspaceKey, workspaceKey);
  if (source !== null) h2.set(Header.EventSource, source);
  await jetstream(nc).publish(`${h.env.SVC_SUBJECT_PREFIX}.events.${eventName}`, JSON.stringify({ n }), {
    msgID: `source-test-${n}-${Date.now()}`,
    headers: h2,
  });
}

async function dropped(): Promise<number> {
  const metric = dispatcher.deps.metrics.getSingleMetric("svc_webhook_events_dropped_total");
  const { values } = (await metric?.get()) ?? { values: [] };
  return values.find((v) => v.labels.reason === "source")?.value ?? 0;
}

/** What the receiver got: "event workspace n" per delivery, in no particular order. */
const delivered = () =>
  receiver.received
    .map((r) => JSON.parse(r.body) as { event: string; workspaceKey: string | null; data: { n: number } })
    .map((d) => `${d.event} ${d.workspaceKey ?? "-"} ${d.data.n}`)
    .sort();

beforeAll(async () => {
  await receiver.start();
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  dispatcher = await h.start(webhookDispatcherService, env);
  await h.start(jobReaperService, env);
  await h.start(pluginRegistryService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  await h.sql(`INSERT INTO resolver.tenants (key, name) VALUES ('acme', 'Acme')`);
  await h.sql(
    `INSERT INTO resolver.workspaces (key, tenant_key, name) VALUES ('ws-a', 'acme', 'A'), ('ws-b', 'acme', 'B')`,
  );
  nc = await connectNats({
    url: h.env.NATS_URL as string,
    auth: h.natsAuth,
    name: "outside publisher",
    logger: createLogger("t", "silent"),
  });
});

afterAll(async () => {
  await nc?.close();
  await h.stopAll();
  await receiver.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("events whose name does not belong to their source", () => {
  it("are dropped and counted; a plugin's events pass only into workspaces whose chain holds it", async () => {
    const bytes = await codePlugin(work, signer, "probe", "// served elsewhere\n", [], {
      runtime: "external",
      events: ["probe.happened"],
    });
    expect((await installPackage(base, operator, bytes)).status).toBe(201);
    expect((await api("POST", "/api/plugins/probe/activate", operator)).status).toBe(200);
    const granted = await api("PUT", "/api/entitlements", operator, {
      items: [{ tenantKey: "acme", pluginId: "probe", entitled: true }],
    });
    expect(granted.status, granted.text).toBe(200);
    const chain = await api("PUT", "/api/workspaces/ws-a/plugins", operator, { chain: ["probe"] });
    expect(chain.status, chain.text).toBe(200);
    const subscribed = await api("POST", "/api/webhooks", operator, {
      eventName: "*",
      targetUrl: receiver.url,
      secret: "s3cret-value",
    });
    expect(subscribed.status, subscribed.text).toBe(201);
    const before = await dropped();

    // Published right after the chain changed: the dispatcher may not have heard of it yet, and asks.
    await publish("probe.happened", "ws-a", null, 1);
    await publish("probe.happened", "ws-a", EventSource.plugin("probe"), 2);
    await publish("probe.happened", null, EventSource.plugin("probe"), 3);
    await publish("user.created", null, EventSource.Platform, 4);
    await publish("flow.relayed", "ws-b", EventSource.flow("f-1"), 5);
    // Not theirs:
    await publish("probe.happened", "ws-b", null, 11); // outside its chain
    await publish("probe.happened", "ws-b", EventSource.plugin("probe"), 12);
    await publish("probe.undeclared", "ws-a", EventSource.plugin("probe"), 13);
    await publish("user.deleted", null, EventSource.plugin("probe"), 14); // a core event from a plugin
    await publish("user.deleted", null, null, 15);
    await publish("plugin.refused", null, EventSource.flow("f-1"), 16); // a core event from a flow
    await publish("probe.happened", "ws-b", EventSource.flow("f-1"), 17); // where the flow may not raise it
    await publish("probe.happened", null, EventSource.plugin("other"), 18); // another plugin's event
    await publish("hello.greeted", null, EventSource.Platform, 19); // the platform claims a plugin event
    await publish("user.created", null, "rbac", 20); // a source the platform does not know
    // After all of them, one that belongs: once it is delivered, every event before it was judged.
    await publish("user.updated", null, EventSource.Platform, 99);

    // Every event judged (the last one's delivery came and ten were dropped), each admitted one became
    // one delivery job, and no other job exists.
    await expect.poll(dropped, { timeout: 20_000 }).toBe(before + 10);
    await receiver.waitFor(6, 20_000);
    const jobs = await h.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'webhook.deliver'`,
    );
    expect(jobs[0]?.n).toBe(6);
    expect(delivered()).toEqual([
      "flow.relayed ws-b 5",
      "probe.happened - 3",
      "probe.happened ws-a 1",
      "probe.happened ws-a 2",
      "user.created - 4",
      "user.updated - 99",
    ]);
  });
});
