/**
 * Fairness between tenants in the webhook pipeline: four small workspaces each publish an event every
 * 20 ms (200 events/s), each with a subscription of its own to a local receiver; first alone, then right
 * after a fifth workspace published nine times as many (90 % of the events) as fast as JetStream
 * acknowledges them, then the same again with the dispatcher's `JobWorkspaceConcurrency` at half and at a
 * tenth of the delivery concurrency (BENCH_WEBHOOK_CAPS=25,5 sets others), and with
 * `JobWorkspaceRatePerSecond` at 500, a quota on each workspace's deliveries (BENCH_WEBHOOK_RATES=500 sets
 * others; the small workspaces' 50 a second each are well under it). Each dispatcher started
 * warms up (connections, caches, compiled code) in an unmeasured phase first, so the baseline is not a
 * cold start's. Reported: the small workspaces'
 * publish-to-receipt p50/p95 in each phase and the ratio to alone (target: within 2x), and the p95 of each
 * stage of their deliveries, read from their jobs: published to matched, to started, to completed. The
 * built dispatcher, in production mode, on a database, subject prefix and stream of its own.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";

import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { createEventPublisher, EventSource } from "@svc/bus";
import pg from "pg";

import { dropRunResources, migrateAll, repoRoot } from "../../scripts/lib/stack.js";
import { stopChild } from "./env.js";
import { dispatcherEnv, startReceiver } from "./receiver.js";
import { againstAlone, percentile, sorted } from "./stats.js";

const SMALL = ["small-1", "small-2", "small-3", "small-4"];
/** The dispatcher's delivery concurrency, and the per-workspace limits of the capped phases. */
const DELIVERY_CONCURRENCY = 50;
/** The positive whole numbers of a comma-separated list (`25,5`); anything else is left out. */
const positiveIntegers = (list: string) =>
  list
    .split(",")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
const CAPS = positiveIntegers(
  process.env.BENCH_WEBHOOK_CAPS ?? `${DELIVERY_CONCURRENCY / 2},${DELIVERY_CONCURRENCY / 10}`,
);
const RATES = positiveIntegers(process.env.BENCH_WEBHOOK_RATES ?? "500");

export interface WebhookFairnessPhase {
  readonly smallEvents: number;
  readonly floodEvents: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly floodP95Ms: number;
  /**
   * The small workspaces' p95 of each stage, from their delivery jobs: published to matched (the job
   * inserted), matched to started, started to completed.
   */
  readonly stagesP95Ms: { readonly matched: number; readonly started: number; readonly completed: number };
}

export interface WebhookFairnessResult {
  readonly alone: WebhookFairnessPhase;
  readonly flooded: WebhookFairnessPhase;
  /** The same flood under each per-workspace limit and rate (its setting, as `Name value`). */
  readonly limited: ReadonlyArray<{ readonly setting: string; readonly phase: WebhookFairnessPhase }>;
}

export async function runWebhookFairnessBench(
  serverUrl: URL,
  stamp: string,
  seconds = 5,
): Promise<WebhookFairnessResult> {
  const database = `svc_bench_hookfair_${stamp}`;
  const dbUrl = new URL(serverUrl);
  dbUrl.pathname = `/${database}`;
  const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
  const prefix = `benchhookfair${stamp}`;
  const stream = `SVC_EVENTS_BENCHHOOKFAIR${stamp.toUpperCase()}`;
  await migrateAll(dbUrl.toString());
  execFileSync(process.execPath, [join(repoRoot, "scripts", "build.mjs")], {
    cwd: repoRoot,
    stdio: "ignore",
  });

  const receipts: Array<{ sentAt: number; at: number; phase: string; small: boolean }> = [];
  const receiver = await startReceiver<{ sentAt: number; phase: string; small: boolean }>((data, at) =>
    receipts.push({ ...data, at }),
  );
  const target = receiver.target;
  const env = dispatcherEnv({ databaseUrl: dbUrl.toString(), natsUrl, prefix, stream });
  const admin = new pg.Client({ connectionString: dbUrl.toString() });
  await admin.connect();
  const nc = await connect({ servers: natsUrl });
  let dispatcher: ChildProcess | undefined;
  const stopDispatcher = async () => {
    if (dispatcher !== undefined) await stopChild(dispatcher);
  };
  const startDispatcher = async (settings: Readonly<Record<string, string>> = {}) => {
    await stopDispatcher();
    dispatcher = spawn(process.execPath, [join("dist", "webhook-dispatcher.mjs")], {
      cwd: repoRoot,
      env: { ...env, ...settings },
      stdio: ["ignore", "ignore", "inherit"],
    });
    const jsm = await jetstreamManager(nc);
    for (let i = 0; ; i++) {
      if (dispatcher.exitCode !== null) throw new Error("the dispatcher exited before it was ready");
      const ready = await jsm.consumers.info(stream, "webhook-dispatcher").then(
        () => true,
        () => false,
      );
      if (ready) break;
      if (i > 300) throw new Error("the dispatcher did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  try {
    const { createSecretBox } = await import("../../services/webhook-dispatcher/src/secrets.js");
    const sealed = createSecretBox(env.BackendHost__SecretsEncryptionKey).seal("bench-secret");
    for (const workspaceKey of ["flood", ...SMALL]) {
      await admin.query(
        `INSERT INTO webhook_dispatcher.subscriptions (id, event_name, workspace_key, target_url, secret_encrypted)
         VALUES ($1, 'flow.bench-tick', $2, $3, $4)`,
        [randomUUID(), workspaceKey, target, sealed],
      );
    }
    const events = createEventPublisher(nc, prefix, EventSource.flow("bench"));
    const ticks = Math.floor((seconds * 1000) / 20);

    const phase = async (name: string, floodEvents: number): Promise<WebhookFairnessPhase> => {
      for (let i = 0; i < floodEvents; i += 500) {
        await Promise.all(
          Array.from({ length: Math.min(500, floodEvents - i) }, () =>
            events.publish("flow.bench-tick", "flood", { sentAt: Date.now(), phase: name, small: false }),
          ),
        );
      }
      const start = Date.now();
      for (let tick = 0; tick < ticks; tick++) {
        const wait = start + tick * 20 - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        for (const workspaceKey of SMALL) {
          void events.publish("flow.bench-tick", workspaceKey, {
            sentAt: Date.now(),
            phase: name,
            small: true,
          });
        }
      }
      const expected = floodEvents + ticks * SMALL.length;
      const deadline = Date.now() + 120_000;
      while (receipts.filter((r) => r.phase === name).length < expected && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const mine = receipts.filter((r) => r.phase === name);
      const stages = await admin.query<{ matched: number; started: number; completed: number }>(
        `SELECT extract(epoch FROM created_at) * 1000 - (payload->'data'->>'sentAt')::float8 AS matched,
                extract(epoch FROM started_at - created_at) * 1000 AS started,
                extract(epoch FROM completed_at - started_at) * 1000 AS completed
         FROM job_reaper.jobs
         WHERE type = 'webhook.deliver' AND payload->'data'->>'phase' = $1 AND workspace_key <> 'flood'`,
        [name],
      );
      const stageP95 = (k: "matched" | "started" | "completed") =>
        Math.round(percentile(sorted(stages.rows.map((r) => Number(r[k]))), 95) * 10) / 10;
      const small = sorted(mine.filter((r) => r.small).map((r) => r.at - r.sentAt));
      const flood = sorted(mine.filter((r) => !r.small).map((r) => r.at - r.sentAt));
      return {
        smallEvents: small.length,
        floodEvents: flood.length,
        p50Ms: percentile(small, 50),
        p95Ms: percentile(small, 95),
        floodP95Ms: flood.length === 0 ? Number.NaN : percentile(flood, 95),
        stagesP95Ms: {
          matched: stageP95("matched"),
          started: stageP95("started"),
          completed: stageP95("completed"),
        },
      };
    };

    const floodSize = ticks * SMALL.length * 9;
    // Every dispatcher warms up (connections, caches, compiled code) before it is measured.
    await startDispatcher();
    await phase("warm", 0);
    const alone = await phase("alone", 0);
    const flooded = await phase("flooded", floodSize);
    const limited: Array<{ setting: string; phase: WebhookFairnessPhase }> = [];
    for (const [name, value] of [
      ...CAPS.map((cap) => ["JobWorkspaceConcurrency", cap] as const),
      ...RATES.map((rate) => ["JobWorkspaceRatePerSecond", rate] as const),
    ]) {
      const setting = `${name} ${value}`;
      await startDispatcher({ [`BackendHost__${name}`]: String(value) });
      await phase(`warm ${setting}`, 0);
      limited.push({ setting, phase: await phase(setting, floodSize) });
    }
    return { alone, flooded, limited };
  } finally {
    await stopDispatcher();
    receiver.close();
    await admin.end();
    await nc.close();
    await dropRunResources({ serverUrl: serverUrl.toString(), database, natsUrl, stream, prefix });
  }
}

export function printWebhookFairnessResults(r: WebhookFairnessResult): void {
  const { alone } = r;
  console.log(
    `\nFairness in the webhook pipeline (${SMALL.length} small workspaces, an event each every 20 ms, a subscription each)`,
  );
  const stages = (p: WebhookFairnessPhase) =>
    `stages p95: matched ${p.stagesP95Ms.matched} ms, to start ${p.stagesP95Ms.started} ms, delivered ${p.stagesP95Ms.completed} ms`;
  console.log(
    `  small workspaces alone: ${alone.smallEvents} deliveries, publish-to-receipt p50 ${alone.p50Ms} ms, p95 ${alone.p95Ms} ms (${stages(alone)})`,
  );
  for (const [label, p] of [
    ["taking turns", r.flooded] as const,
    ...r.limited.map((l) => [`taking turns, ${l.setting}`, l.phase] as const),
  ]) {
    console.log(
      `  after a flood of ${p.floodEvents} events (90 % of all), ${label}: p50 ${p.p50Ms} ms, p95 ${p.p95Ms} ms, ${againstAlone(p.p95Ms, alone.p95Ms)}; the flood's own p95 ${p.floodP95Ms} ms (small workspaces' ${stages(p)})`,
    );
  }
}
