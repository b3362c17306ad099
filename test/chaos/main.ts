/**
 * `make chaos`: a bounded chaos run on the harness's own nats-server, database and
 * gateway port, never the shared ones.
 *
 * It starts the six services as child processes (esbuild bundles, as deployed), a webhook receiver and a
 * subscription to it, then publishes events onto JetStream at a steady rate while it, in turn: kills -9
 * each service (and restarts it at once, as Kubernetes would), kills -9 the nats-server and restarts it
 * on the same store after a few seconds, terminates the database's backends, and flaps the receiver
 * (503, reset connections, nothing listening). Then it stops the load and drains, and reports events
 * published, deliveries, dead letters, lost events and duplicate job completions (both must be 0, else
 * the exit status is 1), and how long each part took to recover. See docs/operator-guide.md, "Chaos testing".
 *
 *   make chaos                                   the full run (about 2 min 15 s)
 *   make chaos CHAOS_ARGS=--quick                shorter phases (about a minute)
 *   make chaos CHAOS_ARGS="--rate 40 --keep-logs"  another rate; keep the processes' logs
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { Bus, connectNats, createEventPublisher, EventSource } from "@svc/bus";
import { messageClient, pingMessages, type PingReply } from "@svc/contracts";
import { createLogger } from "@svc/observability";
import pg from "pg";

import { DEMO, type ServiceDir, SERVICES, tcpReachable } from "../../scripts/lib/stack.js";
import { countDuplicateCompletions, deadLetterEventIds } from "./jobs-audit.js";
import { CHAOS_EVENT, type ChaosEvent, OutboxLoad, SteadyLoad } from "./load.js";
import { bundleServices, type ExitRecord, findNatsServer, freePort, ManagedProcess } from "./processes.js";
import { ChaosReceiver, chaosUserName } from "./receiver.js";
import { duration, errorLines, percentile, seconds, table } from "./report.js";
import { chaosRun, chaosServiceEnv, pollUntil, preparedDatabase } from "./run.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rate: { type: "string", default: "25" },
    "receiver-delay": { type: "string", default: "150" },
    deadline: { type: "string" },
    "keep-logs": { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
  strict: true,
});
if (args.help) {
  console.log(`usage: make chaos [CHAOS_ARGS="--quick --rate N --receiver-delay MS --deadline S --keep-logs"]
  --quick              shorter phases (about 65 s instead of 130 s)
  --rate N             events published per second (default 25)
  --receiver-delay MS  how long the receiver takes to answer 200 (default 150)
  --deadline S         hard limit of the whole run, seconds (default 300, quick 200)
  --keep-logs          keep the services' and nats-server's logs (the path is printed)`);
  process.exit(0);
}

function numberArg(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n < min || n > max) {
    console.error(`--${name}: expected a number from ${min} to ${max} (got ${JSON.stringify(value)})`);
    process.exit(64);
  }
  return n;
}
const RATE = numberArg("rate", args.rate, 1, 500);
/**
 * Users created per second through the API (rbac's outbox), beside the events published straight. Each
 * costs a password hash (scrypt, tens of milliseconds): at 4 a second the backlog built during the 60 s
 * NATS outage, retried, kept rbac saturated for the rest of the run (sign-in 504): rbac does not yet shed
 * hashing work it cannot finish within a request's deadline (noted in the operator guide).
 */
const USER_RATE = 1;
const RECEIVER_DELAY = numberArg("receiver-delay", args["receiver-delay"], 0, 5_000);
const T = args.quick
  ? { baseline: 4_000, phase: 5_000, natsOutages: [5_000], natsPhase: 10_000, dbFault: 2_000, dbPhase: 6_000 }
  : {
      baseline: 8_000,
      phase: 8_000,
      natsOutages: [5_000, 60_000],
      natsPhase: 15_000,
      dbFault: 3_000,
      dbPhase: 10_000,
    };
// Each flap step outlasts the circuit's open time, so every kind of failure is really tried.
const FLAP_STEP = args.quick ? 2_500 : 3_000;
/** After the flap, the full run waits out the engine's 30 s retry backoff; --quick leaves it to the drain. */
const FLAP_HOLD = args.quick ? 1_000 : 36_000;
const DRAIN_MS = 100_000;
const RECOVERY_TIMEOUT = 60_000;
const DEADLINE_MS = numberArg("deadline", args.deadline ?? (args.quick ? "200" : "300"), 10, 3_600) * 1000;
const LEASE_MS = 3_000;
const CIRCUIT_OPEN_MS = 2_000;
/** Events published this long before a fault were in flight when it struck: they count for it. */
const IN_FLIGHT_MS = 1_000;

// ---------------------------------------------------------------------------------------------------------
// What the run owns, for the cleanup.

const { t0, say, stamp, dbName, serverUrl, dbUrl, workDir, logDir } = chaosRun("chaos", "svc_chaos_");
const aborter = new AbortController();
const signal = aborter.signal;

let nats: ManagedProcess | undefined;
const services = new Map<ServiceDir, ManagedProcess>();
let receiver: ChaosReceiver | undefined;
let load: SteadyLoad | undefined;
let userLoad: OutboxLoad | undefined;
let nc: NatsConnection | undefined;
let db: pg.Client | undefined;
let databaseCreated = false;
let shuttingDown = false;
let currentPhase = "start-up";
const unexpectedExits: Array<{ service: string; phase: string; exit: ExitRecord }> = [];

// ---------------------------------------------------------------------------------------------------------
// Cleanup: always, once, whatever happened; and a synchronous last resort on exit.

let cleaning: Promise<void> | undefined;
function cleanup(graceful: boolean): Promise<void> {
  cleaning ??= (async () => {
    shuttingDown = true;
    aborter.abort(new Error("the run is over"));
    const step = async (what: string, work: () => Promise<unknown>) => {
      try {
        await work();
      } catch (error) {
        process.stderr.write(`[chaos] cleanup: ${what} failed: ${(error as Error).message}\n`);
      }
    };
    await step("stopping the load", async () => load?.stop(0));
    await step("stopping the services", () =>
      Promise.all([...services.values()].map((s) => s.stop(graceful ? 12_000 : 0))),
    );
    await step("closing the harness's NATS connection", async () => nc?.close());
    await step("stopping the receiver", async () => receiver?.stop());
    await step("stopping nats-server", async () => nats?.stop(5_000));
    await step("closing the database connection", async () => db?.end());
    if (databaseCreated) {
      await step(`dropping database ${dbName}`, async () => {
        const root = new pg.Client({ connectionString: serverUrl.toString() });
        await root.connect();
        try {
          await root.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
        } finally {
          await root.end();
        }
      });
    }
    if (args["keep-logs"]) {
      for (const sub of ["bundles", "nats-store"])
        rmSync(join(workDir, sub), { recursive: true, force: true });
      say(`logs kept in ${logDir}`);
    } else {
      rmSync(workDir, { recursive: true, force: true });
    }
  })();
  return cleaning;
}

function killEverythingNow() {
  for (const s of services.values()) s.killNow();
  nats?.killNow();
}
process.on("exit", killEverythingNow);

let exiting = false;
async function finish(code: number, graceful: boolean): Promise<never> {
  if (exiting) return new Promise<never>(() => undefined);
  exiting = true;
  // The backstop: whatever hangs in the cleanup, the run ends.
  setTimeout(() => {
    process.stderr.write(`[chaos] cleanup did not finish in time; killing what is left\n`);
    killEverythingNow();
    rmSync(workDir, { recursive: true, force: true });
    process.exit(code === 0 ? 2 : code);
  }, 45_000).unref();
  await cleanup(graceful);
  process.exit(code);
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    if (exiting) {
      killEverythingNow();
      process.exit(130);
    }
    say(`${sig}: stopping`);
    void finish(130, false);
  });
}
const deadlineTimer = setTimeout(() => {
  say(`the run passed its deadline of ${DEADLINE_MS / 1000} s: stopping`);
  void finish(2, false);
}, DEADLINE_MS);
deadlineTimer.unref();

// ---------------------------------------------------------------------------------------------------------
// Probes.

let bus: Bus | undefined;

async function ping(name: ServiceDir): Promise<PingReply | undefined> {
  try {
    if (bus === undefined) return undefined;
    return await messageClient(bus, pingMessages(name)).request("ping", {}, { timeoutMs: 1_000 });
  } catch {
    return undefined;
  }
}

let gatewayBase = "";
async function gatewayReady(): Promise<boolean> {
  try {
    return (await fetch(`${gatewayBase}/ready`, { signal: AbortSignal.timeout(3_000) })).status === 200;
  } catch {
    return false;
  }
}

/** Ready: a replica other than `notInstance` answers its ping (and, for the gateway, /ready is 200). */
async function serviceReady(name: ServiceDir, notInstance?: string): Promise<boolean> {
  const reply = await ping(name);
  if (reply === undefined || reply.instance === notInstance) return false;
  return name === "gateway" ? gatewayReady() : true;
}

async function allReady(): Promise<boolean> {
  const states = await Promise.all(SERVICES.map((s) => serviceReady(s)));
  return states.every(Boolean);
}

/** Polls until `check` holds (stopped with the run); the time it first held, or undefined after `timeoutMs`. */
const until = (check: () => Promise<boolean> | boolean, timeoutMs: number) =>
  pollUntil(check, timeoutMs, signal);

/**
 * Deliveries flow: the receiver accepted an event first published at or after `since` (scanning the
 * receipts from index `from`). The time of that receipt, or undefined after `timeoutMs`.
 */
async function flowingSince(since: number, from: number, timeoutMs: number): Promise<number | undefined> {
  const r = receiver as ChaosReceiver;
  const events = (load as SteadyLoad).events;
  let i = from;
  let found: number | undefined;
  await until(() => {
    for (; i < r.acceptedLog.length; i++) {
      const receipt = r.acceptedLog[i] as { seq: number; at: number };
      if ((events[receipt.seq]?.createdAt ?? 0) >= since) {
        found = receipt.at;
        return true;
      }
    }
    return false;
  }, timeoutMs);
  return found;
}

async function holdUntil(at: number): Promise<void> {
  const wait = at - Date.now();
  if (wait > 0) await sleep(wait, undefined, { signal });
}

// ---------------------------------------------------------------------------------------------------------
// Phases.

interface Phase {
  readonly name: string;
  readonly fault: string;
  /** Events created from here on (to the next phase) belong to this phase. */
  readonly startedAt: number;
  readonly faultAt: number | undefined;
  /** The fault is over: the process restarted, the server is back, the receiver answers again. */
  readonly restoredAt: number | undefined;
  readonly readyAt: number | undefined;
  readonly flowingAt: number | undefined;
  readonly note?: string;
}
const phases: Phase[] = [];

async function baselinePhase(): Promise<void> {
  currentPhase = "baseline";
  const startedAt = Date.now();
  say("baseline: steady load, no fault");
  const flowingAt = await flowingSince(startedAt, 0, RECOVERY_TIMEOUT);
  if (flowingAt === undefined) throw new Error("no delivery arrived within a minute of the first event");
  await holdUntil(startedAt + T.baseline);
  phases.push({
    name: "baseline",
    fault: "no fault",
    startedAt,
    faultAt: undefined,
    restoredAt: undefined,
    readyAt: undefined,
    flowingAt,
  });
}

async function killServicePhase(name: ServiceDir): Promise<void> {
  currentPhase = `kill -9 ${name}`;
  const proc = services.get(name) as ManagedProcess;
  const startedAt = Date.now();
  const before = await ping(name);
  const pid = proc.pid;
  const faultAt = Date.now();
  await proc.kill9();
  proc.start();
  const restoredAt = Date.now();
  const mark = (receiver as ChaosReceiver).acceptedLog.length;
  say(`kill -9 ${name} (pid ${pid}), restarted at once as pid ${proc.pid}`);
  const readyAt = await until(() => serviceReady(name, before?.instance), RECOVERY_TIMEOUT);
  const flowingAt = await flowingSince(restoredAt, mark, RECOVERY_TIMEOUT);
  say(
    `  ${name} ready after ${seconds(diff(readyAt, faultAt))}, deliveries after ${seconds(diff(flowingAt, faultAt))}`,
  );
  await holdUntil(faultAt + T.phase);
  phases.push({
    name: `kill -9 ${name}`,
    fault: "SIGKILL, restarted at once",
    startedAt,
    faultAt,
    restoredAt,
    readyAt,
    flowingAt,
  });
}

/** While NATS is down: a forwarded route answered each 500 ms; its slowest answer and the statuses. */
async function probeWhileDown(until: number): Promise<{ slowestMs: number; statuses: Set<number> }> {
  let slowestMs = 0;
  const statuses = new Set<number>();
  while (Date.now() < until - 300) {
    const started = Date.now();
    const answer = await fetch(`${gatewayBase}/api/rbac/roles`, {
      headers: { authorization: `Bearer ${operatorToken}` },
      signal: AbortSignal.timeout(10_000),
    }).catch(() => undefined);
    slowestMs = Math.max(slowestMs, Date.now() - started);
    statuses.add(answer?.status ?? 0);
    await sleep(500, undefined, { signal });
  }
  return { slowestMs, statuses };
}

/** Time from `from` until sign-in answers 200 again. */
async function signInBackAfter(from: number): Promise<number | undefined> {
  const at = await until(async () => {
    const answer = await fetch(`${gatewayBase}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: DEMO.adminUserName, password: DEMO.adminPassword }),
      signal: AbortSignal.timeout(10_000),
    }).catch(() => undefined);
    return answer?.status === 200;
  }, RECOVERY_TIMEOUT);
  return at === undefined ? undefined : at - from;
}

async function natsPhase(downMs: number): Promise<void> {
  const name = `kill -9 nats-server (${downMs / 1000} s)`;
  currentPhase = name;
  const server = nats as ManagedProcess;
  const port = Number(new URL(natsUrl).port);
  const startedAt = Date.now();
  const faultAt = Date.now();
  await server.kill9();
  say(`kill -9 nats-server; restarting it on the same store in ${downMs / 1000} s`);
  await sleep(Math.min(1_000, downMs / 2), undefined, { signal });
  const probe = await probeWhileDown(faultAt + downMs);
  await holdUntil(faultAt + downMs);
  server.start();
  const up = await until(() => tcpReachable("127.0.0.1", port), RECOVERY_TIMEOUT);
  if (up === undefined) throw new Error("nats-server did not come back");
  const restoredAt = up;
  const mark = (receiver as ChaosReceiver).acceptedLog.length;
  const signIn = await signInBackAfter(restoredAt);
  const readyAt = await until(allReady, RECOVERY_TIMEOUT);
  const flowingAt = await flowingSince(restoredAt, mark, RECOVERY_TIMEOUT);
  const note =
    `while down, a forwarded route answered ${[...probe.statuses].join("/")} in ${probe.slowestMs} ms at most; ` +
    `sign-in back ${seconds(signIn)} after NATS returned`;
  failFast.push({ downMs, slowestMs: probe.slowestMs, statuses: [...probe.statuses], signInMs: signIn });
  say(
    `  nats-server back after ${seconds(restoredAt - faultAt)}; all services ready after ${seconds(diff(readyAt, faultAt))}, deliveries after ${seconds(diff(flowingAt, faultAt))}; ${note}`,
  );
  await holdUntil(Math.max(faultAt + T.natsPhase, restoredAt + 5_000));
  phases.push({
    name,
    fault: `SIGKILL, restarted after ${downMs / 1000} s`,
    startedAt,
    faultAt,
    restoredAt,
    readyAt,
    flowingAt,
    note,
  });
}

/** Per NATS outage: how fast forwarded routes failed while down, and when sign-in worked again. */
const failFast: Array<{
  downMs: number;
  slowestMs: number;
  statuses: number[];
  signInMs: number | undefined;
}> = [];
let operatorToken = "";

async function databasePhase(): Promise<void> {
  currentPhase = "terminate database backends";
  const client = db as pg.Client;
  const startedAt = Date.now();
  const faultAt = Date.now();
  let terminated = 0;
  // A burst, as during a failover: connections opened again within the burst are cut again.
  while (Date.now() < faultAt + T.dbFault) {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
       FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
      [dbName],
    );
    terminated += rows[0]?.n ?? 0;
    await sleep(500, undefined, { signal });
  }
  const restoredAt = Date.now();
  const mark = (receiver as ChaosReceiver).acceptedLog.length;
  say(`terminated ${terminated} backends of ${dbName} over ${seconds(restoredAt - faultAt)}`);
  const readyAt = await until(allReady, RECOVERY_TIMEOUT);
  const flowingAt = await flowingSince(restoredAt, mark, RECOVERY_TIMEOUT);
  say(
    `  ready after ${seconds(diff(readyAt, faultAt))}, deliveries after ${seconds(diff(flowingAt, faultAt))}`,
  );
  await holdUntil(faultAt + T.dbPhase);
  phases.push({
    name: "terminate DB backends",
    fault: `pg_terminate_backend every 0.5 s for ${T.dbFault / 1000} s`,
    startedAt,
    faultAt,
    restoredAt,
    readyAt,
    flowingAt,
    note: `${terminated} backends terminated`,
  });
}

async function flapPhase(): Promise<void> {
  currentPhase = "flap the receiver";
  const r = receiver as ChaosReceiver;
  const startedAt = Date.now();
  const faultAt = Date.now();
  for (const mode of ["503", "reset", "down"] as const) {
    say(
      `receiver: ${mode === "down" ? "not listening" : mode === "reset" ? "resetting connections" : "answering 503"} for ${FLAP_STEP / 1000} s`,
    );
    await r.setMode(mode);
    await sleep(FLAP_STEP, undefined, { signal });
  }
  await r.setMode("ok");
  const restoredAt = Date.now();
  const mark = r.acceptedLog.length;
  const flowingAt = await flowingSince(restoredAt, mark, RECOVERY_TIMEOUT);
  say(`  receiver answers 200 again; deliveries after ${seconds(diff(flowingAt, faultAt))}`);
  await holdUntil(restoredAt + FLAP_HOLD);
  phases.push({
    name: "flap the receiver",
    fault: `503, reset, down: ${FLAP_STEP / 1000} s each`,
    startedAt,
    faultAt,
    restoredAt,
    readyAt: restoredAt,
    flowingAt,
  });
}

function diff(at: number | undefined, from: number | undefined): number | undefined {
  return at === undefined || from === undefined ? undefined : at - from;
}

// ---------------------------------------------------------------------------------------------------------
// The run.

let natsUrl = "";

async function run(): Promise<number> {
  say(`run ${stamp}: ${RATE} events/s, database ${dbName}, work directory ${workDir}`);

  // Bundles of the current sources (the image's form, half the memory of tsx), in the work directory.
  const bundleDir = join(workDir, "bundles");
  mkdirSync(bundleDir);
  const bundles = await bundleServices(bundleDir);

  // Own nats-server with JetStream on a free port and its own store.
  const natsPort = await freePort();
  natsUrl = `nats://127.0.0.1:${natsPort}`;
  const storeDir = join(workDir, "nats-store");
  mkdirSync(storeDir);
  nats = new ManagedProcess(
    "nats-server",
    findNatsServer(),
    ["-js", "-a", "127.0.0.1", "-p", String(natsPort), "-sd", storeDir],
    { PATH: process.env.PATH ?? "" },
    join(logDir, "nats-server.log"),
    (p, exit) => {
      if (!shuttingDown) unexpectedExits.push({ service: p.name, phase: currentPhase, exit });
    },
  );
  nats.start();
  if ((await until(() => tcpReachable("127.0.0.1", natsPort), 15_000)) === undefined)
    throw new Error("nats-server did not start");
  say(`nats-server on ${natsUrl}, store ${storeDir}`);

  // Own database: migrated, seeded (demo workspace and operator), and instrumented.
  databaseCreated = true;
  db = await preparedDatabase(dbUrl, "chaos-harness");
  say(`database ${dbName} migrated and seeded`);

  const secret = randomBytes(16).toString("hex");
  receiver = new ChaosReceiver(secret, RECEIVER_DELAY);
  await receiver.start();

  const gatewayPort = await freePort();
  gatewayBase = `http://127.0.0.1:${gatewayPort}`;
  const prefix = `chaos${stamp.replace(/_/g, "")}`;
  const env: NodeJS.ProcessEnv = {
    ...chaosServiceEnv({
      databaseUrl: dbUrl.toString(),
      natsUrl,
      prefix,
      stream: `SVC_EVENTS_${prefix.toUpperCase()}`,
      leaseMs: LEASE_MS,
    }),
    LOG_LEVEL: "warn",
    GATEWAY_PORT: String(gatewayPort),
    BackendHost__WebhookCircuitOpenMs: String(CIRCUIT_OPEN_MS),
    // The harness signs in again after each NATS outage; the limit itself is not under test here.
    BackendHost__RateLimitAuthPerMinute: "1000",
    // The outbox load creates users through the API at its own rate, and the sign-in probe signs in as
    // one account many times a minute; the limits are not under test here.
    BackendHost__RateLimitApiPerMinute: "1000000",
    BackendHost__RateLimitAuthPerAccountPerMinute: "1000",
  };
  for (const name of SERVICES) {
    const proc = new ManagedProcess(
      name,
      process.execPath,
      [bundles[name]],
      env,
      join(logDir, `${name}.log`),
      (p, exit) => {
        if (shuttingDown) return;
        unexpectedExits.push({ service: p.name, phase: currentPhase, exit });
        say(`${p.name} exited on its own (${exit.signal ?? exit.code}); restarting it in 1 s`);
        setTimeout(() => {
          if (!shuttingDown && !p.running) p.start();
        }, 1_000).unref();
      },
    );
    services.set(name, proc);
    proc.start();
  }

  nc = await connectNats({ url: natsUrl, name: "chaos-harness", logger: createLogger("chaos", "silent") });
  bus = new Bus({
    nc,
    prefix,
    service: "chaos",
    logger: createLogger("chaos", "silent"),
    defaultTimeoutMs: 2_000,
  });
  if ((await until(allReady, 120_000)) === undefined) throw new Error("the services did not become ready");
  say(`six services ready; gateway on ${gatewayBase}`);

  // The subscription, through the operator API.
  const login = await fetch(`${gatewayBase}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: DEMO.adminUserName, password: DEMO.adminPassword }),
  });
  if (!login.ok) throw new Error(`sign-in failed: ${login.status} ${await login.text()}`);
  const { accessToken } = (await login.json()) as { accessToken: string };
  operatorToken = accessToken;
  const created = await fetch(`${gatewayBase}/api/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${accessToken}` },
    body: JSON.stringify({ eventName: CHAOS_EVENT, targetUrl: receiver.url, secret }),
  });
  if (!created.ok)
    throw new Error(`creating the subscription failed: ${created.status} ${await created.text()}`);
  const subscription = (await created.json()) as { id: string };
  say(`subscription ${subscription.id} → ${receiver.url}`);
  // The outbox load's events: users created through rbac, their user.created relayed by its outbox.
  const userHook = await fetch(`${gatewayBase}/api/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${accessToken}` },
    body: JSON.stringify({ eventName: "user.created", targetUrl: receiver.url, secret }),
  });
  if (!userHook.ok)
    throw new Error(
      `creating the user.created subscription failed: ${userHook.status} ${await userHook.text()}`,
    );

  load = new SteadyLoad(
    createEventPublisher(nc, prefix, EventSource.flow("chaos")),
    RATE,
    DEMO.workspaceKey,
    stamp,
  );
  load.start();
  userLoad = new OutboxLoad(
    () => gatewayBase,
    () => operatorToken,
    USER_RATE,
    chaosUserName,
  );
  userLoad.start();

  await baselinePhase();
  for (const name of SERVICES) await killServicePhase(name);
  for (const downMs of T.natsOutages) await natsPhase(downMs);
  await databasePhase();
  await flapPhase();

  // Drain: stop the load, then wait (bounded) until every acknowledged event is delivered or dead.
  currentPhase = "drain";
  const loadStoppedAt = Date.now();
  await Promise.all([load.stop(20_000), userLoad.stop(20_000)]);
  say(`load stopped: ${load.events.length} events created; draining (at most ${DRAIN_MS / 1000} s)`);
  const drainStart = Date.now();
  let expedited = 0;
  let drained = false;
  let lastReport = 0;
  while (Date.now() < drainStart + DRAIN_MS) {
    // Failed attempts wait 30 s and more (the engine's backoff): make the waiting ones due now.
    expedited +=
      (
        await db.query(
          `UPDATE job_reaper.jobs SET run_at = now()
           WHERE type = 'webhook.deliver' AND status = 'Pending' AND run_at > now()`,
        )
      ).rowCount ?? 0;
    const dead = await deadLetterEventIds(db);
    const open = load.events.filter(
      (e) => e.ackedAt !== undefined && !receiver?.firstAcceptedAt.has(e.seq) && !dead.has(e.eventId),
    ).length;
    const openUsers = (userLoad?.users ?? []).filter(
      (u) => u.committedAt !== undefined && !receiver?.userFirstAcceptedAt.has(u.n),
    ).length;
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM job_reaper.jobs WHERE status IN ('Pending', 'Running')`,
    );
    const active = rows[0]?.n ?? 0;
    if (open === 0 && openUsers === 0 && active === 0) {
      drained = true;
      break;
    }
    if (Date.now() - lastReport > 10_000) {
      say(`  draining: ${open} acknowledged events not yet delivered, ${active} jobs pending or running`);
      lastReport = Date.now();
    }
    await sleep(2_000, undefined, { signal });
  }
  const drainMs = Date.now() - drainStart;
  say(drained ? `drained in ${seconds(drainMs)}` : `NOT drained within ${seconds(DRAIN_MS)}`);

  // Stop the services before counting, so that no write is in flight.
  shuttingDown = true;
  await Promise.all([...services.values()].map((s) => s.stop(15_000)));
  return report({ drained, drainMs, expedited, loadStoppedAt, stream: env.SVC_EVENTS_STREAM as string });
}

// ---------------------------------------------------------------------------------------------------------
// The report.

async function report(o: {
  drained: boolean;
  drainMs: number;
  expedited: number;
  loadStoppedAt: number;
  stream: string;
}): Promise<number> {
  const client = db as pg.Client;
  const r = receiver as ChaosReceiver;
  const events = (load as SteadyLoad).events;
  const acked = events.filter((e) => e.ackedAt !== undefined);
  const dead = await deadLetterEventIds(client);
  const count = async (text: string) => (await client.query<{ n: number }>(text)).rows[0]?.n ?? 0;

  const jobs = new Map<string, { status: string; attempts: number; createdAt: number }>();
  for (const row of (
    await client.query<{ event_id: string; status: string; attempts: number; created_ms: number }>(
      `SELECT payload->>'eventId' AS event_id, status, attempts,
              (extract(epoch FROM created_at) * 1000)::float8 AS created_ms
       FROM job_reaper.jobs WHERE type = 'webhook.deliver'`,
    )
  ).rows)
    jobs.set(row.event_id, { status: row.status, attempts: row.attempts, createdAt: row.created_ms });
  const jobStatus = new Map([...jobs].map(([id, j]) => [id, j.status]));
  const byStatus = (
    await client.query<{ status: string; n: number; retried: number }>(
      `SELECT status, count(*)::int AS n, count(*) FILTER (WHERE attempts > 1)::int AS retried
       FROM job_reaper.jobs WHERE type = 'webhook.deliver' GROUP BY status ORDER BY status`,
    )
  ).rows;
  const { extraJobs, doubleFinal } = await countDuplicateCompletions(client);
  const reaped = await count(
    `SELECT count(*)::int AS n FROM chaos.job_writes
     WHERE old_status = 'Running' AND new_status = 'Pending' AND reason LIKE 'lease expired%'`,
  );
  const lastErrors = (
    await client.query<{ last_error: string; n: number }>(
      `SELECT last_error, count(*)::int AS n FROM job_reaper.jobs
       WHERE type = 'webhook.deliver' AND status = 'Failed' GROUP BY last_error ORDER BY n DESC LIMIT 5`,
    )
  ).rows;
  let consumer = "unavailable";
  try {
    const info = await (
      await jetstreamManager(nc as NatsConnection)
    ).consumers.info(o.stream, "webhook-dispatcher");
    consumer = `${info.num_ack_pending} unacknowledged, ${info.num_pending} not yet delivered`;
  } catch {
    // reported as unavailable
  }
  const staleWritebacks = [...services.values()].reduce((n, p) => {
    try {
      return n + readFileSync(p.logFile, "utf8").split("a job write-back was refused").length - 1;
    } catch {
      return n;
    }
  }, 0);

  const lost = acked.filter((e) => !r.firstAcceptedAt.has(e.seq) && !dead.has(e.eventId));
  const lostByJob = new Map<string, number>();
  for (const e of lost) {
    const s = jobStatus.get(e.eventId) ?? "no job";
    lostByJob.set(s, (lostByJob.get(s) ?? 0) + 1);
  }
  const succeededWithoutReceipt = acked.filter(
    (e) => jobStatus.get(e.eventId) === "Succeeded" && !r.firstAcceptedAt.has(e.seq),
  ).length;
  const multiIds = [...r.deliveryIdsBySeq.values()].filter((ids) => ids.size > 1).length;
  const unacked = events.filter((e) => e.ackedAt === undefined);
  const unackedDelivered = unacked.filter((e) => r.firstAcceptedAt.has(e.seq)).length;
  const duplicateCompletions = extraJobs + doubleFinal;

  /** JetStream's acknowledgement to the first accepted delivery (the harness's publish retries excluded). */
  const latency = (list: typeof events) =>
    list
      .filter((e) => e.ackedAt !== undefined && r.firstAcceptedAt.has(e.seq))
      .map((e) => (r.firstAcceptedAt.get(e.seq) as number) - (e.ackedAt as number))
      .sort((a, b) => a - b);

  console.log(
    `\nChaos run ${stamp} (${new Date(t0).toISOString()}), ${RATE} events/s${args.quick ? ", --quick" : ""}`,
  );
  console.log(
    `services: NODE_ENV=test, lease ${LEASE_MS / 1000} s, poll 0.2 s, reaper 0.5 s, circuit open ${CIRCUIT_OPEN_MS / 1000} s; receiver answers in ${RECEIVER_DELAY} ms\n`,
  );

  // A phase's events: published from IN_FLIGHT_MS before its fault to IN_FLIGHT_MS before the next one.
  const windowStart = (p: Phase) => (p.faultAt ?? p.startedAt) - (p.faultAt === undefined ? 0 : IN_FLIGHT_MS);
  const delay = (e: ChaosEvent) =>
    (r.firstAcceptedAt.get(e.seq) ?? Number.POSITIVE_INFINITY) - (e.ackedAt ?? Number.NEGATIVE_INFINITY);
  const slowest: string[] = [];
  const phaseRows = phases.map((p, i) => {
    const next = phases[i + 1];
    const end = next === undefined ? o.loadStoppedAt : windowStart(next);
    const own = acked.filter((e) => e.createdAt >= windowStart(p) && e.createdAt < end);
    const lat = latency(own);
    // Backlog cleared: every event published up to the end of the fault has been delivered.
    const backlog = own
      .filter((e) => e.createdAt <= (p.restoredAt ?? 0))
      .map((e) => r.firstAcceptedAt.get(e.seq));
    const cleared = backlog.every((v) => v !== undefined) ? Math.max(...backlog) : undefined;
    const worst = own.reduce<ChaosEvent | undefined>(
      (w, e) => (w === undefined || delay(e) > delay(w) ? e : w),
      undefined,
    );
    if (worst !== undefined && delay(worst) > 2_000) {
      const job = jobs.get(worst.eventId);
      slowest.push(
        `  ${p.name}: slowest event #${worst.seq} delivered ${duration(delay(worst))} after its acknowledgement; ` +
          (job === undefined
            ? "no job"
            : `its job was created ${duration(job.createdAt - (worst.ackedAt as number))} after it, ${job.attempts} attempt(s)`),
      );
    }
    return [
      p.name,
      p.faultAt === undefined ? "-" : duration(diff(p.restoredAt, p.faultAt)),
      duration(diff(p.readyAt, p.faultAt)),
      duration(diff(p.flowingAt, p.faultAt)),
      p.faultAt === undefined ? "-" : cleared === undefined ? "never" : duration(cleared - p.faultAt),
      String(own.length),
      duration(percentile(lat, 50)),
      duration(percentile(lat, 99)),
      duration(lat[lat.length - 1]),
    ];
  });
  console.log("Recovery by phase (times from the fault)");
  console.log(
    table(
      ["phase", "down", "ready", "flowing", "backlog cleared", "events", "p50", "p99", "max latency"],
      phaseRows,
    ),
  );
  for (const p of phases) console.log(`  ${p.name}: ${p.fault}${p.note ? ` (${p.note})` : ""}`);
  for (const line of slowest) console.log(line);
  console.log(
    [
      "  down: until the process was restarted, the server back, the burst or the flap over",
      "  ready: the new process answers its ping (gateway: and /ready is 200); after the NATS and database",
      "    faults: all six do",
      "  flowing: the first delivery of an event published after the fault was over",
      "  backlog cleared: every event published before the fault was over has been delivered (events that",
      "    failed an attempt wait for the engine's 30 s backoff, or for the drain)",
      `  events: acknowledged events published from ${IN_FLIGHT_MS / 1000} s before the fault (in flight when it`,
      "    struck) to 1 s before the next; latency: JetStream acknowledgement to first accepted delivery",
    ].join("\n"),
  );

  const serviceRows = [nats as ManagedProcess, ...services.values()].map((p) => {
    let errors = 0;
    try {
      for (const n of errorLines(readFileSync(p.logFile, "utf8")).values()) errors += n;
    } catch {
      // no log
    }
    const own = p.exits.filter((e) => e.expected).length;
    return [p.name, String(p.starts), String(own), String(p.exits.length - own), String(errors)];
  });
  console.log("\nProcesses");
  console.log(
    table(["process", "starts", "stopped by harness", "exited on its own", "error log lines"], serviceRows),
  );
  for (const u of unexpectedExits)
    console.log(`  ${u.service} exited on its own during "${u.phase}" (${u.exit.signal ?? u.exit.code})`);
  const messages = new Map<string, number>();
  for (const p of services.values()) {
    try {
      for (const [m, n] of errorLines(readFileSync(p.logFile, "utf8")))
        messages.set(`${p.name}: ${m}`, (messages.get(`${p.name}: ${m}`) ?? 0) + n);
    } catch {
      // no log
    }
  }
  for (const [m, n] of [...messages].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`  ${n} × ${m}`);

  const users = (userLoad as OutboxLoad).users;
  const committedUsers = users.filter((u) => u.committedAt !== undefined);
  const lostUsers = committedUsers.filter((u) => !r.userFirstAcceptedAt.has(u.n));
  const failed =
    lost.length > 0 ||
    duplicateCompletions > 0 ||
    multiIds > 0 ||
    succeededWithoutReceipt > 0 ||
    lostUsers.length > 0 ||
    unexpectedExits.length > 0 ||
    (userLoad?.takenOnRetry ?? 0) > 0;
  const all = latency(acked);
  const rows: string[][] = [
    ["events created", String(events.length), ""],
    ["events published (acknowledged by JetStream)", String(acked.length), ""],
    [
      "  acknowledged as a duplicate (an earlier try was stored)",
      String(acked.filter((e) => e.duplicateAck).length),
      "",
    ],
    ["  publish tries that failed (retried)", String((load as SteadyLoad).publishErrors), ""],
    ["events never acknowledged (given up)", String(unacked.length), `${unackedDelivered} delivered anyway`],
    [
      "requests received by the receiver",
      String(r.requests),
      `${r.answered503} answered 503, ${r.resets} reset`,
    ],
    [
      "requests accepted (200)",
      String(r.accepted),
      `${r.accepted - r.deliveries.size} repeated a delivery id`,
    ],
    ["deliveries received (distinct delivery ids)", String(r.deliveries.size), ""],
    ["events delivered", String(r.firstAcceptedAt.size), ""],
    ["dead letters (Failed jobs)", String(dead.size), ""],
    ["LOST EVENTS (acknowledged, no delivery, no dead letter)", String(lost.length), "must be 0"],
    [
      "users created through the API (rbac's outbox)",
      String(committedUsers.length),
      `of ${users.length} asked`,
    ],
    [
      "  requests sent again (outcome unknown)",
      String((userLoad as OutboxLoad).requestErrors),
      [...(userLoad as OutboxLoad).retriedStatuses]
        .sort((a, b) => b[1] - a[1])
        .map(([s, n]) => `${s === 0 ? "no answer" : s} ${n}`)
        .join(", "),
    ],
    [
      "KEYED RETRIES THAT RAN AGAIN (409 taken, not replayed)",
      String((userLoad as OutboxLoad).takenOnRetry),
      "must be 0",
    ],
    ["LOST USER EVENTS (created, user.created never delivered)", String(lostUsers.length), "must be 0"],
    ["SERVICES THAT EXITED ON THEIR OWN (crashed)", String(unexpectedExits.length), "must be 0"],
    ["DUPLICATE JOB COMPLETIONS", String(duplicateCompletions), "must be 0"],
    ["  extra jobs for one (event, subscription)", String(extraJobs), ""],
    ["  jobs whose final state was written twice", String(doubleFinal), ""],
    ["events delivered under two delivery ids", String(multiIds), "must be 0"],
    ["jobs Succeeded without an accepted request", String(succeededWithoutReceipt), "must be 0"],
    ["bad signatures", String(r.badSignatures), ""],
    ["jobs by status", byStatus.map((s) => `${s.status} ${s.n}`).join(", "), ""],
    ["jobs that took more than one attempt", String(byStatus.reduce((a, s) => a + s.retried, 0)), ""],
    ["expired leases reaped (taken over from a dead worker)", String(reaped), ""],
    ["stale write-backs refused (fencing)", String(staleWritebacks), ""],
    ["dispatcher's JetStream consumer at the end", consumer, ""],
    [
      "drain",
      o.drained ? duration(o.drainMs) : `not drained in ${duration(o.drainMs)}`,
      `${o.expedited} waiting retries made due`,
    ],
    [
      "latency, all events",
      `p50 ${duration(percentile(all, 50))}, p99 ${duration(percentile(all, 99))}, max ${duration(all[all.length - 1])}`,
      "",
    ],
    ...failFast.flatMap((f) => [
      [
        `NATS down ${f.downMs / 1000} s: slowest forwarded route`,
        `${f.slowestMs} ms (${f.statuses.join("/")})`,
        "target < 100 ms, 503",
      ],
      [`NATS down ${f.downMs / 1000} s: sign-in back after`, seconds(f.signInMs), "target < 5 s"],
    ]),
  ];
  console.log("\nTotals");
  console.log(table(["figure", "value", "note"], rows));
  if (lost.length > 0) {
    console.log(
      `  lost events by job status: ${[...lostByJob].map(([s, n]) => `${s} ${n}`).join(", ")}; first: ${lost
        .slice(0, 5)
        .map((e) => `#${e.seq} ${e.eventId}`)
        .join(", ")}`,
    );
  }
  for (const e of lastErrors) console.log(`  dead letter: ${e.n} × ${e.last_error}`);
  console.log(
    `\nresult: ${failed ? "FAILED (lost or duplicated work, or a crash, see above)" : "passed (nothing lost, nothing completed twice, no crash)"}`,
  );
  return failed ? 1 : 0;
}

try {
  const code = await run();
  await finish(code, true);
} catch (error) {
  if (!signal.aborted || !exiting)
    process.stderr.write(`[chaos] ${(error as Error).stack ?? String(error)}\n`);
  await finish(2, false);
}
