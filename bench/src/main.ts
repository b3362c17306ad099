/**
 * `make bench`: throughput and latency of `GET /workspace/public/resolve` through the gateway, next to
 * two references measured the same way in the same run:
 *   - bare Fastify returning the same JSON (one process, no hop: the ceiling);
 *   - moleculer-web forwarding to a moleculer action over the same NATS (the peer a Node user would pick).
 * Also the gateway with its resolution cache off (every request crosses NATS to the resolver and
 * PostgreSQL), and the idle resident memory and CPU of each of the six services (with the database's
 * transactions per second while idle).
 *
 * Then the job engine next to graphile-worker (jobs.ts).
 *
 * Then fairness between workspaces in the job engine (fairness.ts; with jobs) and in the webhook pipeline
 * (webhook-fairness.ts; with webhooks); both alone with --only fairness.
 *
 * Options: --duration S (default 10), --connections N (default 50), --tool wrk|autocannon (default: wrk
 * when installed, else autocannon), --only http|plugins|surface|tracing|webhooks|jobs|fairness|growth
 * (plugins: the idle stack and the plugin lifecycle steps of http only; surface: its references, the
 * resolve route and the public surface only; growth, run only when asked: the figures at
 * volume, growth.ts; --backlog N sets its queued jobs, default 1,000,000; --parts jobs,webhooks,stack runs
 * some of it), --jobs N (default 20000), --rounds N (default 3),
 * --plugin-spares N (plugin processes the registry keeps started; default: the setting's, 2), --secure (the
 * HTTP part runs on a nats-server of its own with the production shape: operator mode, TLS with client
 * certificates, each service on its own user, plugin users minted per activation; the moleculer
 * reference stays on the open server), --cluster (the webhooks part again on a three-node NATS cluster of
 * its own with three copies of the stream, and the ratio to the single server), --tracing-ratio R (the
 * tracing gateways' sampling ratio, default 0.1; `off` turns them off too: the control, which shows the
 * method's noise), --tracing-rounds N (fresh gateway pairs, default 6), --tracing-windows N and
 * --tracing-window-seconds S (per round and route, each gateway of the pair is loaded in turn for N
 * windows of S seconds; defaults 4 and 2), --tracing-warmup S (each gateway's warm-up per route before
 * them, default 6), --pair-env A=1,B=2 (variables the second gateway of each pair also gets: with
 * `--tracing-ratio off`, the method compares that setting alone),
 * BENCH_CPU_PROF=<dir> (the tracing comparison's gateways and the webhook part's services write V8 CPU
 * profiles there).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import type { ServiceName } from "@svc/contracts";
import pg from "pg";

import {
  DEMO,
  dropRunResources,
  freePort,
  migrateAll,
  repoRoot,
  seedDemo,
  SERVICES,
  waitFor,
} from "../../scripts/lib/stack.js";
import { NatsCluster } from "../../test/support/nats-cluster.js";
import { productionEnv, SERVICE_NODE_FLAGS, stopChild } from "./env.js";
import { printFairnessResults, runFairnessBench } from "./fairness.js";
import { GROWTH_PARTS, printGrowthResults, runGrowthBench } from "./growth.js";
import { printJobsResults, runJobsBench } from "./jobs-main.js";
import { hasWrk, load, type LoadResult } from "./load.js";
import {
  type ActivationBenchResult,
  benchSignerEnv,
  type PluginBenchResult,
  printActivationResults,
  printPluginResults,
  renderPackages,
  runActivationBench,
  runPluginBench,
  setUpRenderChain,
} from "./plugins.js";
import { percentile, sorted } from "./stats.js";
import { printWebhookFairnessResults, runWebhookFairnessBench } from "./webhook-fairness.js";
import { printWebhooksResults, profileFlags, runWebhooksBench } from "./webhooks.js";

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    connections: { type: "string", default: "50" },
    tool: { type: "string" },
    warmup: { type: "string", default: "2" },
    only: { type: "string" },
    jobs: { type: "string", default: "20000" },
    rounds: { type: "string", default: "3" },
    // Plugin processes the registry keeps started (BackendHost__PluginSpareProcesses; default: the setting's).
    "plugin-spares": { type: "string" },
    secure: { type: "boolean", default: false },
    // The webhooks part once more on a three-node NATS cluster with three copies of the stream.
    cluster: { type: "boolean", default: false },
    // The sampling ratio of the tracing gateways (the target is at 0.1); `off` starts them with tracing off
    // too, a control that shows the method's noise.
    "tracing-ratio": { type: "string", default: "0.1" },
    // Variables the second gateway of each tracing pair also gets (`A=1,B=2`): with `--tracing-ratio off`,
    // the same method compares a setting of the environment alone (MALLOC_ARENA_MAX, say).
    "pair-env": { type: "string", default: "" },
    // Rounds of the tracing comparison: each starts a fresh gateway with tracing off and one with it on.
    "tracing-rounds": { type: "string", default: "6" },
    // Per round and route, the windows each gateway of the pair is loaded for, in turn, and their length.
    "tracing-windows": { type: "string", default: "4" },
    "tracing-window-seconds": { type: "string", default: "2" },
    // The warm-up of each gateway of the pair, per route, before its windows (see tracingRuns).
    "tracing-warmup": { type: "string", default: "6" },
    backlog: { type: "string", default: "1000000" },
    parts: { type: "string", default: GROWTH_PARTS.join(",") },
  },
});
const only = args.only;
const tracingOff = args["tracing-ratio"] === "off";
const pairEnv = Object.fromEntries(
  args["pair-env"]
    .split(",")
    .filter((pair) => pair.includes("="))
    .map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
) as Record<string, string>;
const pairLabel = args["pair-env"] === "" ? "" : ` + ${args["pair-env"]}`;
const ratioLabel = (tracingOff ? "off" : `${Number(args["tracing-ratio"]) * 100} %`) + pairLabel;

const durationSeconds = Number(args.duration);
const tracingRounds = Number(args["tracing-rounds"]);
const tracingWindows = Number(args["tracing-windows"]);
const tracingWindowSeconds = Number(args["tracing-window-seconds"]);
const tracingWarmupSeconds = Number(args["tracing-warmup"]);
const connections = Number(args.connections);
const warmupSeconds = Number(args.warmup);
const tool = (args.tool ?? ((await hasWrk()) ? "wrk" : "autocannon")) as "wrk" | "autocannon";
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const stamp = Date.now().toString(36);
const dbName = `svc_bench_${stamp}`;
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/${dbName}`;
const prefix = `bench${stamp}`;
const stream = `SVC_EVENTS_BENCH${stamp.toUpperCase()}`;
const children: ChildProcess[] = [];

function log(message: string) {
  process.stderr.write(`[bench] ${message}\n`);
}

function start(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  child.stdout?.resume();
  children.push(child);
  return child;
}

async function httpReady(url: string, timeoutMs = 30_000) {
  await waitFor(url, async () => (await fetch(url).catch(() => undefined))?.ok === true, timeoutMs);
}

/** User + system CPU time of a process so far, in seconds (from /proc; clock ticks are 100 Hz on Linux). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function committedTransactions(): Promise<number> {
  const admin = new pg.Client({ connectionString: serverUrl.toString() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: string }>(
      "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1",
      [dbName],
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await admin.end();
  }
}

/** CPU share of each idle service and the database's transactions per second, over `seconds`. */
async function measureIdle(services: Array<{ name: string; child: ChildProcess }>, seconds: number) {
  const before = services.map(({ child }) => cpuSeconds(child.pid as number));
  const xactBefore = await committedTransactions();
  await new Promise((r) => setTimeout(r, seconds * 1_000));
  const xactAfter = await committedTransactions();
  services.forEach(({ name, child }, i) => {
    idle.push({
      service: name,
      cpuPercent: ((cpuSeconds(child.pid as number) - (before[i] as number)) / seconds) * 100,
    });
  });
  // pg_stat_database is updated when a backend reports (at most every second or so): a long window smooths it.
  idleTransactionsPerSecond = (xactAfter - xactBefore) / seconds;
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/**
 * A process's resident memory (RSS), and the part of it no other process shares (private: its heaps and
 * its own dirty pages). The rest of RSS is mostly the node binary's pages, which every Node process on the
 * host maps from one page cache: about 30 MB in a bare `node`, 40-50 MB in a service.
 */
function memoryMb(pid: number): { rss: number; private: number } {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(rollup)?.[1] ?? 0);
  return { rss: kb("Rss") / 1024, private: (kb("Private_Clean") + kb("Private_Dirty")) / 1024 };
}

/** The processes a service started (the plugin registry's plugin processes), from /proc. */
function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Each plugin process of the registry: resident and private memory (target: each under 40 MB). */
function pluginProcessMemory(
  registryPid: number | undefined,
): Array<{ pid: number; rss: number; private: number }> {
  if (registryPid === undefined) return [];
  return childPids(registryPid).flatMap((pid) => {
    try {
      return [{ pid, ...memoryMb(pid) }];
    } catch {
      return []; // it exited meanwhile
    }
  });
}

async function measure(
  name: string,
  url: string,
  headers?: Record<string, string>,
  clients = connections,
): Promise<LoadResult & { name: string }> {
  const options = { connections: clients, tool, ...(headers ? { headers } : {}) };
  await load(url, { ...options, durationSeconds: warmupSeconds });
  const result = await load(url, { ...options, durationSeconds });
  log(
    `${name}: ${result.requestsPerSecond.toFixed(0)} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms`,
  );
  return { name, ...result };
}

/** With --secure: the bus the stack runs on, and the settings of each service's own user. */
let secureBus:
  | {
      stop: () => Promise<unknown>;
      env: Record<string, string>;
      serviceEnv: (name: string) => Promise<Record<string, string>>;
    }
  | undefined;

async function startSecure() {
  const { startSecureBus, fileUsers } = await import("../../test/support/secure-bus.js");
  const { bus, stop } = await startSecureBus();
  const users = await fileUsers(bus);
  log(`bus: ${bus.url} (operator mode, TLS with client certificates, a user per service)`);
  secureBus = {
    stop,
    env: users.env,
    serviceEnv: async (name) => ({
      NATS_CREDS_FILE: await users.serviceCreds(name as ServiceName, prefix, stream),
    }),
  };
}

async function cleanup() {
  await Promise.all(children.map(stopChild));
  const violations = (await secureBus?.stop()) as string[] | undefined;
  if (violations !== undefined) {
    log(`bus: ${violations.length} permission violations refused`);
    for (const line of violations.slice(0, 5)) log(`  ${line}`);
  }
  await dropRunResources({ serverUrl: serverUrl.toString(), database: dbName, natsUrl, stream, prefix });
}

const results: Array<LoadResult & { name: string }> = [];
let pluginResults: PluginBenchResult | undefined;
let activationResults: ActivationBenchResult | undefined;
const routeResults: Array<LoadResult & { name: string }> = [];
/** The two gateway routes with tracing off, then on at the asked sampling ratio (medians over rounds). */
const tracingResults: Array<
  LoadResult & { name: string; cpuUsPerRequest?: number; spread: readonly [number, number] }
> = [];
let exportedSpans = { requests: 0, bytes: 0 };
const surfaceResults: Array<LoadResult & { name: string }> = [];
const memory: Array<{ service: string; startedMb: number; idleMb: number; privateMb: number }> = [];
/** The gateway's largest resident memory while the benchmark loads it, sampled (target < 150 MB). */
let gatewayLoadedMb: number | undefined;
let gatewaySampler: NodeJS.Timeout | undefined;
/** The registry's plugin processes: the spares at rest, then every one after the plugin route's load. */
let spareMemory: Array<{ pid: number; rss: number; private: number }> = [];
let pluginMemory: Array<{ pid: number; rss: number; private: number }> = [];
const idle: Array<{ service: string; cpuPercent: number }> = [];
let idleTransactionsPerSecond = 0;

/** Steps 1-4: the public route through bare Fastify, moleculer-web, and our gateway cached and not. */
async function loadRuns(stackEnv: Record<string, string>, gateway: string): Promise<void> {
  // 1. Bare Fastify.
  const barePort = await freePort();
  const bare = start(["--import", "tsx", "bench/src/bare-fastify.ts"], { PORT: String(barePort) });
  await httpReady(`http://127.0.0.1:${barePort}/workspace/public/resolve`);
  results.push(
    await measure("bare Fastify (no hop)", `http://127.0.0.1:${barePort}/workspace/public/resolve`),
  );
  await stopChild(bare);

  // 2. moleculer-web → NATS → moleculer action.
  const molPort = await freePort();
  const molEnv = { NATS_URL: natsUrl, NAMESPACE: `bench${stamp}`, PORT: String(molPort) };
  const molService = start(["--import", "tsx", "bench/src/moleculer-node.ts"], {
    ...molEnv,
    ROLE: "service",
  });
  const molWeb = start(["--import", "tsx", "bench/src/moleculer-node.ts"], { ...molEnv, ROLE: "web" });
  await httpReady(`http://127.0.0.1:${molPort}/workspace/public/resolve`);
  results.push(
    await measure("moleculer-web → NATS → action", `http://127.0.0.1:${molPort}/workspace/public/resolve`),
  );
  await Promise.all([stopChild(molWeb), stopChild(molService)]);

  // 3. Our gateway as configured by default (resolution cache on).
  results.push(await measure("svc gateway (default, cached)", `${gateway}/workspace/public/resolve`));

  // 4. A second gateway with the cache off: every request crosses NATS to the resolver and PostgreSQL.
  const uncachedPort = await freePort();
  const uncached = start([...SERVICE_NODE_FLAGS, join("dist", "gateway.mjs")], {
    ...stackEnv,
    ...(await secureBus?.serviceEnv("gateway")),
    GATEWAY_PORT: String(uncachedPort),
    BackendHost__ResolveCacheTtlMs: "0",
  });
  await httpReady(`http://127.0.0.1:${uncachedPort}/ready`);
  results.push(
    await measure(
      "svc gateway (cache off, NATS hop)",
      `http://127.0.0.1:${uncachedPort}/workspace/public/resolve`,
    ),
  );
  await stopChild(uncached);
}

/**
 * Gateways with tracing off against gateways exporting their spans over OTLP/HTTP (to a sink here that
 * counts and discards them) at the sampling ratio asked for; the cached public route and the operator GET
 * on each. Two kinds of noise hide a 10 % difference on this machine. Its speed drifts from one few
 * seconds to the next (one process over three 6 s windows in a row: 75 to 108 µs of CPU per request), so
 * each round starts a fresh pair, both running for the whole round, and loads them in turn for short
 * windows (`--tracing-windows` of `--tracing-window-seconds` each, which one first alternating): both see
 * the same drift. And processes of one build differ for their whole life (three untraced ones loaded in
 * turn: 5-8 % apart), so there are `--tracing-rounds` pairs (6), which one starts first alternating. A
 * figure adds up all windows of all rounds (requests over the time they were loaded, CPU time over
 * requests); the spread printed is the rounds' own figures. Each gateway is first warmed up on each route
 * for `--tracing-warmup` seconds (6): a traced process's compiler works for longer (the spans' and the
 * exporter's code runs on one request in ten and reaches the optimising tiers later; V8's helper threads
 * spent 6.3 µs per request 15 s after its start, 1.3 µs 30 s after), and after the general 2 s warm-up
 * the comparison measured that start-up more than what tracing costs a running gateway.
 */
async function tracingRuns(stackEnv: Record<string, string>, token: string): Promise<void> {
  const sink = createServer((req, res) => {
    exportedSpans.requests++;
    req.on("data", (c: Buffer) => (exportedSpans.bytes += c.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", () => resolve()));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as { port: number }).port}/v1/traces`;
  const adminId = JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString())
    .sub as string;
  const bearer = { authorization: `Bearer ${token}` };
  const startGateway = async (traced: boolean) => {
    const port = await freePort();
    const child = start(
      // BENCH_CPU_PROF=<dir>: these gateways write V8 CPU profiles there when they stop.
      [...SERVICE_NODE_FLAGS, ...profileFlags(), join("dist", "gateway.mjs")],
      {
        ...stackEnv,
        ...(await secureBus?.serviceEnv("gateway")),
        GATEWAY_PORT: String(port),
        ...(traced ? pairEnv : {}),
        ...(traced && !tracingOff
          ? {
              OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sinkUrl,
              OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
              OTEL_TRACES_SAMPLER_ARG: args["tracing-ratio"],
            }
          : {}),
      },
    );
    await httpReady(`http://127.0.0.1:${port}/ready`);
    return { child, url: `http://127.0.0.1:${port}` };
  };
  /** One window: what the load tool measured and the gateway's CPU time meanwhile. */
  type Window = { result: LoadResult; cpuSeconds: number };
  // Per side and route, each round's windows.
  const runs = { off: [[], []], on: [[], []] } as Record<"off" | "on", [Window[][], Window[][]]>;
  const routes = [
    { path: "/workspace/public/resolve", headers: undefined },
    { path: `/api/users/${adminId}`, headers: bearer },
  ] as const;
  const median = (values: number[]) => percentile(sorted(values), 50);
  /**
   * Windows added up: requests over the time they were loaded, CPU time over requests (the latencies are
   * the windows' median p50 and p99).
   */
  const sum = (windows: Window[]) => {
    const total = windows.reduce((n, w) => n + w.result.total, 0);
    const cpu = windows.reduce((n, w) => n + w.cpuSeconds, 0);
    return {
      requestsPerSecond: total / (windows.length * tracingWindowSeconds),
      p50Ms: median(windows.map((w) => w.result.p50Ms)),
      p99Ms: median(windows.map((w) => w.result.p99Ms)),
      errors: windows.reduce((n, w) => n + w.result.errors, 0),
      non2xx: windows.reduce((n, w) => n + w.result.non2xx, 0),
      total,
      ...(total > 0 ? { cpuUsPerRequest: (cpu * 1e6) / total } : {}),
    };
  };
  try {
    exportedSpans = { requests: 0, bytes: 0 };
    for (let round = 0; round < tracingRounds; round++) {
      // Both gateways run for the whole round; only one is loaded at a time.
      const starts = round % 2 === 0 ? ([false, true] as const) : ([true, false] as const);
      const gateways = [await startGateway(starts[0]), await startGateway(starts[1])] as const;
      const pair = starts[0] ? { on: gateways[0], off: gateways[1] } : { off: gateways[0], on: gateways[1] };
      try {
        for (const [index, route] of routes.entries()) {
          const options = { connections, tool, ...(route.headers ? { headers: route.headers } : {}) };
          for (const which of ["off", "on"] as const) {
            await load(`${pair[which].url}${route.path}`, {
              ...options,
              durationSeconds: tracingWarmupSeconds,
            });
          }
          const windows = { off: [], on: [] } as Record<"off" | "on", Window[]>;
          for (let w = 0; w < tracingWindows; w++) {
            // Which one goes first alternates, so that neither always follows the other's load.
            const order: Array<"off" | "on"> = (w + round) % 2 === 0 ? ["off", "on"] : ["on", "off"];
            for (const which of order) {
              const pid = pair[which].child.pid as number;
              const before = cpuSeconds(pid);
              const result = await load(`${pair[which].url}${route.path}`, {
                ...options,
                durationSeconds: tracingWindowSeconds,
              });
              windows[which].push({ result, cpuSeconds: cpuSeconds(pid) - before });
            }
          }
          for (const which of ["off", "on"] as const) runs[which][index as 0 | 1].push(windows[which]);
        }
      } finally {
        await Promise.all([stopChild(pair.off.child), stopChild(pair.on.child)]);
      }
    }
    // All rounds' windows added up; the spread is the rounds' own figures.
    const summary = (name: string, rounds: Window[][]) => {
      const rps = rounds.map((windows) => sum(windows).requestsPerSecond);
      return { ...sum(rounds.flat()), name, spread: [Math.min(...rps), Math.max(...rps)] as const };
    };
    tracingResults.push(
      summary("tracing off: cached public resolve", runs.off[0]),
      summary("tracing off: operator GET", runs.off[1]),
      summary(`tracing ${ratioLabel}: cached public resolve`, runs.on[0]),
      summary(`tracing ${ratioLabel}: operator GET`, runs.on[1]),
    );
  } finally {
    await new Promise<void>((resolve) => sink.close(() => resolve()));
  }
}

/** Signs the demo administrator in through the gateway: the token of the operator and plugin steps. */
async function signInAdmin(gateway: string): Promise<string> {
  const login = await fetch(`${gateway}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: DEMO.adminUserName, password: DEMO.adminPassword }),
  });
  const { accessToken } = (await login.json()) as { accessToken: string };
  return accessToken;
}

async function httpBench() {
  try {
    log(
      `load tool: ${tool}, ${connections} connections, ${durationSeconds} s per run after ${warmupSeconds} s warm-up`,
    );
    execFileSync(process.execPath, [join(repoRoot, "scripts", "build.mjs")], {
      cwd: repoRoot,
      stdio: "ignore",
    });
    await migrateAll(dbUrl.toString());
    await seedDemo(dbUrl.toString(), { withAdmin: true });
    if (args.secure) await startSecure();
    const stackEnv = {
      ...productionEnv({ databaseUrl: dbUrl.toString(), natsUrl, prefix, stream }),
      ...secureBus?.env,
      GATEWAY_HOST: "127.0.0.1",
      // The shared limiter runs (counting across replicas through NATS KV) but never rejects the one client.
      BackendHost__RateLimitApiPerMinute: "1000000000",
      ...(args["plugin-spares"] === undefined
        ? {}
        : { BackendHost__PluginSpareProcesses: args["plugin-spares"] }),
      ...benchSignerEnv(),
    };
    const gatewayPort = await freePort();
    const services = await Promise.all(
      SERVICES.map(async (name) => ({
        name,
        child: start([...SERVICE_NODE_FLAGS, join("dist", `${name}.mjs`)], {
          ...stackEnv,
          ...(await secureBus?.serviceEnv(name)),
          GATEWAY_PORT: String(gatewayPort),
        }),
      })),
    );
    const gateway = `http://127.0.0.1:${gatewayPort}`;
    await httpReady(`${gateway}/ready`);
    await new Promise((r) => setTimeout(r, 3_000));
    const started = services.map(({ child }) => rssMb(child.pid as number));
    log("measuring the idle stack for 10 s");
    await measureIdle(services, 10);
    services.forEach(({ name, child }, i) => {
      const { rss, private: privateMb } = memoryMb(child.pid as number);
      memory.push({ service: name, startedMb: started[i] as number, idleMb: rss, privateMb });
    });
    const registryPid = services.find((s) => s.name === "plugin-registry")?.child.pid;
    spareMemory = pluginProcessMemory(registryPid);
    const gatewayPid = services.find((s) => s.name === "gateway")?.child.pid as number;
    gatewaySampler = setInterval(() => {
      try {
        gatewayLoadedMb = Math.max(gatewayLoadedMb ?? 0, rssMb(gatewayPid));
      } catch {
        // the gateway has exited: the run fails on its own, with the reason
      }
    }, 200);
    if (only !== "plugins" && only !== "tracing") await loadRuns(stackEnv, gateway);
    const accessToken = await signInAdmin(gateway);
    if (only === "tracing") {
      await tracingRuns(stackEnv, accessToken);
      return;
    }
    if (only !== "plugins" && only !== "surface") {
      // 5. An authenticated operator GET: token verification, shared rate limit, guard, forward, database read.
      // One indexed row from PostgreSQL, like the public forward's one resolution.
      const adminId = JSON.parse(Buffer.from(accessToken.split(".")[1] as string, "base64url").toString())
        .sub as string;
      const operatorGet = `${gateway}/api/users/${adminId}`;
      const bearer = { authorization: `Bearer ${accessToken}` };
      results.push(await measure("svc operator GET /api/users/{id}", operatorGet, bearer));
      // The same at low load, one request at a time: the latency of the hops themselves (what deferring
      // NATS writes to the end of the event loop's turn could add, NATS_COALESCE_WRITES).
      results.push(await measure("svc operator GET, one connection", operatorGet, bearer, 1));
    }

    if (only !== "plugins" && only !== "surface") {
      log("measuring the gateway with tracing off, then on at 10 % sampling");
      await tracingRuns(stackEnv, accessToken);
    }

    if (only !== "surface") {
      // 6. Plugin install and verification.
      log("measuring plugin install and verification");
      pluginResults = await runPluginBench(gateway, accessToken);

      // 7. Plugin activation cycles, then a plugin route next to a core route doing the same work.
      log("measuring plugin activation and a plugin route");
      activationResults = await runActivationBench(gateway, accessToken);
      const bearer = { authorization: `Bearer ${accessToken}` };
      routeResults.push(
        await measure(
          "core GET /api/plugins/contracts/support",
          `${gateway}/api/plugins/contracts/support`,
          bearer,
        ),
      );
      routeResults.push(
        await measure("plugin GET /api/plugins/bench/info", `${gateway}/api/plugins/bench/info`, bearer),
      );
      pluginMemory = pluginProcessMemory(registryPid);
    }

    if (only === "plugins") return;
    // 8. The public surface: a three-plugin chain rendered through the gateway, next to a bare
    // Fastify process rendering the same templates on every request; and the context route.
    log("measuring the public surface");
    const templates = mkdtempSync(join(tmpdir(), "svc-bench-render-"));
    const packages = await renderPackages(templates);
    await setUpRenderChain(gateway, accessToken, packages, DEMO.tenantKey, DEMO.workspaceKey);
    const naivePort = await freePort();
    const naive = start(["--import", "tsx", "bench/src/naive-render.ts"], {
      PORT: String(naivePort),
      TEMPLATE_DIRS: packages.map((p) => join(p.dir, "views", "surface")).join(":"),
    });
    await httpReady(`http://127.0.0.1:${naivePort}/surface/render`);
    surfaceResults.push(
      await measure(
        "naive peer: Fastify + nunjucks per request",
        `http://127.0.0.1:${naivePort}/surface/render`,
      ),
    );
    await stopChild(naive);
    const rendered = await fetch(`${gateway}/surface/render`, { headers: { host: "localhost" } });
    const page = await rendered.text();
    if (!page.includes("<main><h1>"))
      throw new Error(`the render did not use the chain: ${page.slice(0, 200)}`);
    surfaceResults.push(
      await measure("svc GET /surface/render (3 plugins)", `${gateway}/surface/render`, {
        host: "localhost",
      }),
    );
    surfaceResults.push(
      await measure("svc GET /workspace/public/context", `${gateway}/workspace/public/context`, {
        host: "localhost",
      }),
    );
    rmSync(templates, { recursive: true, force: true });
  } finally {
    clearInterval(gatewaySampler);
    await cleanup();
  }
}

function printHttp() {
  const [bare, mol, ours, oursUncached, operatorGet] = results;
  const pad = (s: string, n: number) => s.padEnd(n);
  const num = (n: number) => n.toFixed(n < 10 ? 2 : 0);
  if (results.length > 0) {
    console.log(`\nGET /workspace/public/resolve, ${connections} connections, ${durationSeconds} s, ${tool}`);
    console.log(
      `${pad("target", 36)}${pad("req/s", 10)}${pad("p50 ms", 9)}${pad("p99 ms", 9)}errors/non-2xx`,
    );
  }
  for (const r of results) {
    console.log(
      `${pad(r.name, 36)}${pad(num(r.requestsPerSecond), 10)}${pad(num(r.p50Ms), 9)}${pad(num(r.p99Ms), 9)}${r.errors}/${r.non2xx}`,
    );
  }
  if (bare && mol && ours && oursUncached) {
    const ratio = ours.requestsPerSecond / mol.requestsPerSecond;
    console.log("\nratios (throughput)");
    console.log(
      `  svc cached   / moleculer-web : ${ratio.toFixed(2)}x   (target >= 1.30x: ${ratio >= 1.3 ? "met" : "NOT met"})`,
    );
    const bareRatio = ours.requestsPerSecond / bare.requestsPerSecond;
    console.log(
      `  svc cached   / bare Fastify  : ${bareRatio.toFixed(2)}x   (target >= 0.50x: ${bareRatio >= 0.5 ? "met" : "NOT met"})`,
    );
    console.log(
      `  svc no cache / moleculer-web : ${(oursUncached.requestsPerSecond / mol.requestsPerSecond).toFixed(2)}x`,
    );
    console.log(
      `  svc cached p99 ${num(ours.p99Ms)} ms (target < 10 ms: ${ours.p99Ms < 10 ? "met" : "NOT met"})`,
    );
    if (operatorGet) {
      const authRatio = operatorGet.requestsPerSecond / oursUncached.requestsPerSecond;
      console.log(
        `  operator GET (auth) / public forward (no cache) : ${authRatio.toFixed(2)}x   (target >= 0.80x: ${authRatio >= 0.8 ? "met" : "NOT met"}; both cross NATS and read PostgreSQL)`,
      );
      console.log(
        `  operator GET (auth) / public route (cached)     : ${(operatorGet.requestsPerSecond / ours.requestsPerSecond).toFixed(2)}x`,
      );
      // The operator GET against moleculer-web was 3,420 / 15,064 = 0.227x when the gateway's hot paths were
      // first profiled; the target is 1.5 times that.
      const molRatio = operatorGet.requestsPerSecond / mol.requestsPerSecond;
      console.log(
        `  operator GET (auth) / moleculer-web            : ${molRatio.toFixed(3)}x   (target >= 0.340x, 1.5 times 0.227x: ${molRatio >= 0.34 ? "met" : "NOT met"})`,
      );
    }
  }
  console.log(
    "\nresident memory 3 s after ready, then after 10 s idle (target < 100 MB each, idle), and its private part",
  );
  for (const m of memory)
    console.log(
      `  ${pad(m.service, 20)}${m.startedMb.toFixed(1)} MB, idle ${m.idleMb.toFixed(1)} MB ${m.idleMb < 100 ? "" : "(over)"}  private ${m.privateMb.toFixed(1)} MB`,
    );
  if (gatewayLoadedMb !== undefined)
    console.log(
      `  gateway, the most while loaded (sampled every 200 ms): ${gatewayLoadedMb.toFixed(1)} MB (target < 150 MB: ${gatewayLoadedMb < 150 ? "met" : "NOT met"})`,
    );
  const printPluginMemory = (label: string, list: typeof spareMemory) => {
    if (list.length === 0) return;
    const worst = Math.max(...list.map((p) => p.rss));
    console.log(
      `  ${label}: resident ${list.map((p) => p.rss.toFixed(1)).join(", ")} MB (target < 40 MB each: ${worst < 40 ? "met" : "NOT met"}); private ${list.map((p) => p.private.toFixed(1)).join(", ")} MB`,
    );
  };
  printPluginMemory("plugin processes, spares at rest", spareMemory);
  printPluginMemory("plugin processes after the plugin route's load", pluginMemory);
  console.log("\nidle CPU over 10 s, no request and no job (target < 2 % each)");
  for (const c of idle)
    console.log(`  ${pad(c.service, 20)}${c.cpuPercent.toFixed(2)} % ${c.cpuPercent < 2 ? "" : "(over)"}`);
  console.log(
    `  database: ${idleTransactionsPerSecond.toFixed(1)} transactions/s (slow polls, lease sweeps and heartbeats only)`,
  );
  if (pluginResults !== undefined) printPluginResults(pluginResults);
  if (activationResults !== undefined) printActivationResults(activationResults);
  const [core, plugin] = routeResults;
  if (core && plugin) {
    console.log(`\nA plugin route next to a core route doing the same work, ${connections} connections`);
    for (const r of routeResults) {
      console.log(
        `  ${pad(r.name, 42)}${pad(num(r.requestsPerSecond), 10)} req/s  p50 ${num(r.p50Ms)} ms  p99 ${num(r.p99Ms)} ms  ${r.errors}/${r.non2xx}`,
      );
    }
    const ratio = plugin.requestsPerSecond / core.requestsPerSecond;
    console.log(
      `  plugin / core : ${ratio.toFixed(2)}x   (target >= 0.80x: ${ratio >= 0.8 ? "met" : "NOT met"})`,
    );
  }
  const [offCached, offOperator, onCached, onOperator] = tracingResults;
  if (offCached && offOperator && onCached && onOperator) {
    console.log(
      `\nTracing, ${connections} connections: ${tracingRounds} rounds, each a fresh gateway with tracing off and one ${tracingOff ? "also off (the control)" : "exporting"}, loaded in turn for ${tracingWindows} windows of ${tracingWindowSeconds} s per route after ${tracingWarmupSeconds} s of warm-up; all windows added up`,
    );
    for (const r of tracingResults) {
      console.log(
        `  ${pad(r.name, 41)} ${pad(num(r.requestsPerSecond), 10)} req/s  p50 ${num(r.p50Ms)} ms  p99 ${num(r.p99Ms)} ms  ${r.errors}/${r.non2xx}  (rounds ${num(r.spread[0])}-${num(r.spread[1])})`,
      );
    }
    for (const [label, off, onRun] of [
      ["cached public resolve", offCached, onCached],
      ["operator GET", offOperator, onOperator],
    ] as const) {
      const cost = 1 - onRun.requestsPerSecond / off.requestsPerSecond;
      console.log(
        tracingOff
          ? `  ${pad(`${label}: the control, tracing off${pairLabel}`, 42)} ${(cost * 100).toFixed(1)} % below the other (${pairLabel ? "the setting's cost" : "the method's noise"})`
          : `  ${pad(`${label}: ${ratioLabel} sampling costs`, 42)} ${(cost * 100).toFixed(1)} % of throughput (target <= 10 %: ${cost <= 0.1 ? "met" : "NOT met"})`,
      );
      // The gateway's own CPU time per request: what tracing adds to each, whatever the load tool and the
      // other processes took from the two cores meanwhile.
      if (off.cpuUsPerRequest !== undefined && onRun.cpuUsPerRequest !== undefined) {
        const extra = onRun.cpuUsPerRequest / off.cpuUsPerRequest - 1;
        console.log(
          `  ${pad(`${label}: gateway CPU per request`, 42)} ${off.cpuUsPerRequest.toFixed(0)} µs off, ${onRun.cpuUsPerRequest.toFixed(0)} µs ${tracingOff ? "on the control" : "traced"} (${extra >= 0 ? "+" : ""}${(extra * 100).toFixed(1)} %)`,
        );
      }
    }
    console.log(
      `  exported: ${exportedSpans.requests} OTLP requests, ${(exportedSpans.bytes / 1024).toFixed(0)} KB; tracing off is compared with the build before tracing in the closing note`,
    );
  }
  const [naive, render, context] = surfaceResults;
  if (naive && render && context && mol) {
    console.log(`\nThe public surface, ${connections} connections`);
    for (const r of surfaceResults) {
      console.log(
        `  ${pad(r.name, 44)}${pad(num(r.requestsPerSecond), 10)} req/s  p50 ${num(r.p50Ms)} ms  p99 ${num(r.p99Ms)} ms  ${r.errors}/${r.non2xx}`,
      );
    }
    const renderRatio = render.requestsPerSecond / naive.requestsPerSecond;
    console.log(
      `  render / naive peer : ${renderRatio.toFixed(2)}x   (target >= 1.50x: ${renderRatio >= 1.5 ? "met" : "NOT met"}); p99 ${num(render.p99Ms)} ms (target < 15 ms: ${render.p99Ms < 15 ? "met" : "NOT met"})`,
    );
    const contextRatio = context.requestsPerSecond / mol.requestsPerSecond;
    console.log(
      `  context / moleculer-web (resolve) : ${contextRatio.toFixed(2)}x   (target >= 1.50x: ${contextRatio >= 1.5 ? "met" : "NOT met"})`,
    );
  }
}

if (only === undefined || only === "http" || only === "plugins" || only === "surface" || only === "tracing") {
  await httpBench();
  printHttp();
}
if (only === undefined || only === "webhooks") {
  const single = await runWebhooksBench(serverUrl, stamp);
  printWebhooksResults(single);
  if (args.cluster) {
    log("webhooks on a three-node NATS cluster, three copies of the events stream");
    const cluster = new NatsCluster();
    await cluster.start(3);
    try {
      const on = await runWebhooksBench(serverUrl, `${stamp}c`, 10_000, 10, {
        natsUrl: cluster.url,
        replicas: 3,
      });
      printWebhooksResults(on, "three nats-servers, three copies");
      console.log(
        `  cluster / one server: deliveries ${(on.deliveriesPerSecond / single.deliveriesPerSecond).toFixed(2)}x, publishes ${(on.publishPerSecond / single.publishPerSecond).toFixed(2)}x, steady p99 ${on.latencyP99Ms} ms against ${single.latencyP99Ms} ms`,
      );
    } finally {
      await cluster.dispose();
    }
  }
}
if (only === undefined || only === "jobs") {
  const jobs = Number(args.jobs);
  const jobResults = await runJobsBench(serverUrl, stamp, jobs, 10, Number(args.rounds));
  printJobsResults(jobResults, jobs, 10);
}
if (only === undefined || only === "jobs" || only === "fairness") {
  printFairnessResults(await runFairnessBench(serverUrl, stamp));
}
if (only === undefined || only === "webhooks" || only === "fairness") {
  printWebhookFairnessResults(await runWebhookFairnessBench(serverUrl, stamp));
}
if (only === "growth") {
  printGrowthResults(
    await runGrowthBench(serverUrl, stamp, Number(args.backlog), new Set(args.parts.split(","))),
  );
}
