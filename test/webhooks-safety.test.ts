/**
 * Targets on loopback/private/metadata addresses are refused at delivery time unless allowed;
 * a dispatcher process killed in the middle of a delivery loses nothing.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

import { configOf } from "@svc/config";
import { createDb, type Db, sql } from "@svc/db";
import { extractContext, startTracing, stopTracing, withContext } from "@svc/observability";
import { jobReaperService } from "@svc/service-job-reaper";
import { webhookDispatcherService, webhookSettings } from "@svc/service-webhook-dispatcher";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
// Internal helpers reached by path: the policy and the subscription insert without the HTTP layer.
import { createTargetPolicy } from "../services/webhook-dispatcher/src/http-client.js";
import { createSecretBox } from "../services/webhook-dispatcher/src/secrets.js";
import { createHarness } from "./support/harness.js";
import { platformPublisher } from "./support/publisher.js";
import { Receiver } from "./support/receiver.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const db: Db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 4, applicationName: "webhooks-safety" });
const children = new Set<ChildProcess>();
const receivers: Receiver[] = [];
afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await h.stopAll();
  await db.end();
  for (const r of receivers) await r.stop().catch(() => undefined);
});

async function addSubscription(eventName: string, targetUrl: string) {
  const box = createSecretBox(configOf(h.config(), webhookSettings).backendHost.secretsEncryptionKey);
  await db.query(sql`
    INSERT INTO webhook_dispatcher.subscriptions (id, event_name, target_url, secret_encrypted)
    VALUES (gen_random_uuid(), ${eventName}, ${targetUrl}, ${box.seal("k")})`);
}

describe("the target policy", () => {
  it("allows public unicast addresses only, unless a network is allowed", () => {
    const strict = createTargetPolicy([]);
    for (const refused of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "::1",
      "fd00::1",
      "0.0.0.0",
      "::ffff:127.0.0.1",
      "100.64.0.1",
    ]) {
      expect(strict(refused)).toBe(false);
    }
    expect(strict("93.184.216.34")).toBe(true);
    expect(strict("2606:4700::1111")).toBe(true);
    expect(createTargetPolicy(["127.0.0.0/8"])("127.0.0.1")).toBe(true);
  });

  it("refuses IPv6 addresses that embed an IPv4 one (an SSRF gap)", () => {
    const strict = createTargetPolicy([]);
    for (const refused of [
      "::a9fe:a9fe", // ::169.254.169.254, IPv4-compatible
      "::7f00:1", // ::127.0.0.1
      "::0a01:0203",
      "::808:808", // even a public address: ::/96 is deprecated, no receiver lives there
      "64:ff9b::7f00:1", // NAT64
      "2002:7f00:1::", // 6to4
      "2001::1", // Teredo
    ]) {
      expect(strict(refused), refused).toBe(false);
    }
  });
});

describe("delivery safety", () => {
  it("refuses a loopback target at delivery time and dead-letters the job", async () => {
    const receiver = new Receiver();
    receivers.push(receiver);
    await receiver.start();
    // No allowed networks: 127.0.0.1 is refused. The host name resolves to it, checked on connection.
    await h.start(webhookDispatcherService, { BackendHost__JobPollIntervalMs: "100" });
    await addSubscription("user.created", receiver.url.replace("127.0.0.1", "localhost"));
    await addSubscription("user.updated", "http://169.254.169.254/latest/meta-data");
    const { nc, events } = await platformPublisher(h);
    await events.publish("user.created", null, {});
    await events.publish("user.updated", null, {});
    await until(
      async () =>
        (
          await db.one<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status = 'Failed'`,
          )
        ).n === 2,
    );
    const jobs = await db.any<{ attempts: number; last_error: string }>(
      sql`SELECT attempts, last_error FROM job_reaper.jobs`,
    );
    for (const job of jobs)
      expect(job).toMatchObject({ attempts: 1, last_error: expect.stringMatching(/refused/) });
    expect(receiver.received).toHaveLength(0);
    await nc.close();
    await h.stopAll();
    await db.query(sql`DELETE FROM webhook_dispatcher.subscriptions`);
  });

  it("a dispatcher killed mid-delivery loses nothing: another delivers after the lease, same delivery id, same trace", async () => {
    // Tracing on here (spans made, none exported) and in the child, which exports to a port that refuses:
    // what is asserted is the traceparent the receiver gets, from the job's stored trace context.
    await startTracing({ service: "webhooks-safety", version: "0", instance: "test" }, {}, []);
    onTestFinished(() => stopTracing());
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const caller = {
      get: (name: string) => (name === "traceparent" ? `00-${traceId}-00f067aa0ba902b7-01` : undefined),
    };
    const receiver = new Receiver();
    receivers.push(receiver);
    await receiver.start();
    receiver.respond = () => (receiver.received.length === 1 ? "hang" : { status: 200 });
    await db.query(sql`TRUNCATE job_reaper.jobs`);
    await addSubscription("user.deleted", receiver.url);
    const env = {
      ...(await h.envFor("webhook-dispatcher")),
      PATH: process.env.PATH ?? "",
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__JobLeaseMs: "1500",
      BackendHost__JobPollIntervalMs: "100",
      BackendHost__WebhookTimeoutMs: "60000",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:9/v1/traces",
    };
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join("services", "webhook-dispatcher", "src", "main.ts")],
      {
        cwd: repoRoot,
        env,
        stdio: "ignore",
      },
    );
    children.add(child);
    const { nc, events } = await platformPublisher(h);
    // The child's consumer takes the event, enqueues the job and starts delivering it.
    await until(async () => {
      await withContext(extractContext(caller), () =>
        events.publish("user.deleted", null, { n: 1 }, { eventId: "kill-test" }),
      );
      return receiver.received.length === 1;
    }, 30_000);
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const extra = {
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__JobLeaseMs: "1500",
      BackendHost__JobPollIntervalMs: "100",
      BackendHost__JobReaperIntervalMs: "100",
    };
    await h.start(jobReaperService, extra);
    await h.start(webhookDispatcherService, extra);
    await receiver.waitFor(2, 20_000);
    expect(receiver.received[1]?.headers["x-svc-delivery"]).toBe(
      receiver.received[0]?.headers["x-svc-delivery"],
    );
    // The job's trace context survived the kill in its row: both attempts continue the publisher's trace.
    for (const r of receiver.received.slice(0, 2))
      expect(String(r.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    await until(
      async () =>
        (await db.one<{ status: string }>(sql`SELECT status FROM job_reaper.jobs`)).status === "Succeeded",
    );
    expect(await db.one(sql`SELECT count(*)::int AS n FROM job_reaper.jobs`)).toEqual({ n: 1 });
    await nc.close();
  }, 60_000);
});
