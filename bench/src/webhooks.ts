/**
 * End-to-end webhook figures: events published on JetStream → matched → `webhook.deliver` jobs → signed
 * POSTs received by a local HTTP receiver. Measures the publish rate, sustained deliveries per second for
 * a burst, and publish-to-receipt latency at a steady 500 events/s.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";

import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createEventPublisher, EventSource } from "@svc/bus";
import pg from "pg";

import { deleteRunStreams, migrateAll, repoRoot } from "../../scripts/lib/stack.js";
import { stopChild } from "./env.js";
import { dispatcherEnv, startReceiver } from "./receiver.js";
import { percentile } from "./stats.js";

export interface WebhooksBenchResult {
  readonly burstEvents: number;
  readonly publishPerSecond: number;
  readonly deliveriesPerSecond: number;
  readonly steadyRate: number;
  readonly steadyEvents: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  readonly steadyReceived: number;
  /** Subscriptions in the table (the benchmark's own one included). */
  readonly subscriptions: number;
  /** The dispatcher's match query for a batch of 100 events, its mean time per event (ms). */
  readonly matchMsPerEvent: number;
}

/** `BENCH_CPU_PROF=<dir>`: the services write a V8 CPU profile there when they stop (open it in Chrome's DevTools). */
export function profileFlags(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

export async function runWebhooksBench(
  serverUrl: URL,
  stamp: string,
  burst = 10_000,
  steadySeconds = 10,
  /** Another NATS (a cluster's URLs, comma-separated) and the copies the stream keeps there. */
  bus: { readonly natsUrl?: string; readonly replicas?: number } = {},
  /** Other subscriptions written beside the benchmark's, spread over this many workspaces (none match). */
  others: { readonly subscriptions: number; readonly workspaces: number } = {
    subscriptions: 0,
    workspaces: 0,
  },
): Promise<WebhooksBenchResult> {
  const dbName = `svc_bench_hooks_${stamp}`;
  const dbUrl = new URL(serverUrl);
  dbUrl.pathname = `/${dbName}`;
  const natsUrl = bus.natsUrl ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222";
  const prefix = `benchhooks${stamp}`;
  const stream = `SVC_EVENTS_BENCHHOOKS${stamp.toUpperCase()}`;
  await migrateAll(dbUrl.toString());
  execFileSync(process.execPath, [join(repoRoot, "scripts", "build.mjs")], {
    cwd: repoRoot,
    stdio: "ignore",
  });

  // The receiver: records receipt time against the publish time carried in the payload.
  const receipts: Array<{ sentAt: number; at: number; phase: string }> = [];
  const receiver = await startReceiver<{ sentAt: number; phase: string }>((data, at) =>
    receipts.push({ sentAt: data.sentAt, at, phase: data.phase }),
  );
  const target = receiver.target;
  const env = {
    ...dispatcherEnv({ databaseUrl: dbUrl.toString(), natsUrl, prefix, stream }),
    BackendHost__NatsReplicas: String(bus.replicas ?? 1),
  };
  const children: ChildProcess[] = [];
  const admin = new pg.Client({ connectionString: dbUrl.toString() });
  await admin.connect();
  const nc = await connect({ servers: natsUrl.split(",") });
  try {
    // The dispatcher seals secrets with the key above; insert the subscription the way it would.
    const { createSecretBox } = await import("../../services/webhook-dispatcher/src/secrets.js");
    const sealed = createSecretBox(env.BackendHost__SecretsEncryptionKey).seal("bench-secret");
    await admin.query(
      `INSERT INTO webhook_dispatcher.subscriptions (id, event_name, target_url, secret_encrypted) VALUES ($1, 'flow.bench-tick', $2, $3)`,
      [randomUUID(), target, sealed],
    );
    if (others.subscriptions > 0) {
      // A third on the benchmark's own event in other workspaces, a third on a wildcard of its family,
      // a third on another event: what the match query must look past for every event.
      await admin.query(
        `INSERT INTO webhook_dispatcher.subscriptions (id, event_name, workspace_key, target_url, secret_encrypted)
         SELECT gen_random_uuid(), (ARRAY['flow.bench-tick', 'flow.*', 'user.created'])[i % 3 + 1],
                'ws-' || (i % $2), 'https://receiver.example/hook', $3
         FROM generate_series(1, $1) AS i`,
        [others.subscriptions, others.workspaces, sealed],
      );
      await admin.query("ANALYZE webhook_dispatcher.subscriptions");
    }
    children.push(
      spawn(process.execPath, [...profileFlags(), join("dist", "webhook-dispatcher.mjs")], {
        cwd: repoRoot,
        env,
        stdio: ["ignore", "ignore", "inherit"],
      }),
    );
    // Ready when its consumer exists on the stream; a dispatcher that exits first ends the benchmark.
    let exited: number | null | undefined;
    children[0]?.once("exit", (code) => {
      exited = code;
    });
    const jsm = await jetstreamManager(nc);
    for (let i = 0; ; i++) {
      if (exited !== undefined) throw new Error(`the dispatcher exited (${exited}) before it was ready`);
      if (
        await jsm.consumers.info(stream, "webhook-dispatcher").then(
          () => true,
          () => false,
        )
      )
        break;
      if (i > 300) throw new Error("dispatcher did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
    const events = createEventPublisher(nc, prefix, EventSource.flow("bench"));

    // Burst: publish as fast as acknowledgements allow, then wait for every delivery.
    const t0 = Date.now();
    for (let i = 0; i < burst; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, burst - i) }, () =>
          events.publish("flow.bench-tick", "default", { sentAt: Date.now(), phase: "burst" }),
        ),
      );
    }
    const publishSeconds = (Date.now() - t0) / 1000;
    const deadline = Date.now() + 300_000;
    while (receipts.filter((r) => r.phase === "burst").length < burst && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const burstReceipts = receipts.filter((r) => r.phase === "burst");
    const lastAt = Math.max(...burstReceipts.map((r) => r.at));
    const deliveriesPerSecond = burstReceipts.length / ((lastAt - t0) / 1000);

    // Steady: 500 events/s for `steadySeconds`, in 10 ms ticks of 5 events.
    const rate = 500;
    const steadyEvents = rate * steadySeconds;
    const start = Date.now();
    for (let sent = 0; sent < steadyEvents; sent += 5) {
      const due = start + (sent / rate) * 1000;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      for (let k = 0; k < 5; k++)
        void events.publish("flow.bench-tick", "default", { sentAt: Date.now(), phase: "steady" });
    }
    const steadyDeadline = Date.now() + 30_000;
    while (
      receipts.filter((r) => r.phase === "steady").length < steadyEvents &&
      Date.now() < steadyDeadline
    ) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const latencies = receipts
      .filter((r) => r.phase === "steady")
      .map((r) => r.at - r.sentAt)
      .sort((a, b) => a - b);
    // The match query as the dispatcher runs it for one event, timed here against the same tables.
    const { matchingSubscriptionsAndFlows } =
      await import("../../services/webhook-dispatcher/src/scoped-tables.js");
    const { createDb } = await import("@svc/db");
    const db = createDb({
      databaseUrl: dbUrl.toString(),
      maximumPoolSize: 1,
      applicationName: "bench-match",
    });
    // A batch of 100 events, as the dispatcher's consumer hands them over; the time per event.
    const batch = Array.from({ length: 100 }, () => ({
      eventName: "flow.bench-tick",
      workspaceKey: "default",
    }));
    const flowPairs = new Set(batch.map((_, i) => i));
    let matchMsPerEvent = 0;
    try {
      for (let i = 0; i < 20; i++) await matchingSubscriptionsAndFlows(db, batch, flowPairs);
      const t = performance.now();
      for (let i = 0; i < 100; i++) await matchingSubscriptionsAndFlows(db, batch, flowPairs);
      matchMsPerEvent = (performance.now() - t) / 100 / batch.length;
    } finally {
      await db.end();
    }
    return {
      burstEvents: burst,
      publishPerSecond: burst / publishSeconds,
      deliveriesPerSecond,
      steadyRate: rate,
      steadyEvents,
      latencyP50Ms: percentile(latencies, 50),
      latencyP99Ms: percentile(latencies, 99),
      steadyReceived: latencies.length,
      subscriptions: 1 + others.subscriptions,
      matchMsPerEvent,
    };
  } finally {
    for (const c of children) await stopChild(c);
    receiver.close();
    await admin.end();
    await deleteRunStreams(nc, stream, prefix);
    await nc.close();
    const root = new pg.Client({ connectionString: serverUrl.toString() });
    await root.connect();
    await root.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined);
    await root.end();
  }
}

export function printWebhooksResults(r: WebhooksBenchResult, on = "one nats-server") {
  console.log(`\nWebhooks end to end (one subscription, local receiver, signed deliveries; ${on})`);
  console.log(
    `  burst of ${r.burstEvents} events: published ${r.publishPerSecond.toFixed(0)}/s, delivered ${r.deliveriesPerSecond.toFixed(0)}/s (target >= 3000/s: ${r.deliveriesPerSecond >= 3000 ? "met" : "NOT met"})`,
  );
  console.log(
    `  steady ${r.steadyRate} events/s for ${r.steadyEvents} events: publish-to-receipt p50 ${r.latencyP50Ms} ms (target < 20: ${r.latencyP50Ms < 20 ? "met" : "NOT met"}), p99 ${r.latencyP99Ms} ms (target <= 50: ${r.latencyP99Ms <= 50 ? "met" : "NOT met"}), received ${r.steadyReceived}`,
  );
}
