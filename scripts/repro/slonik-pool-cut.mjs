// ADR 0002's reproduction: does slonik survive a pooled connection dying (a proxy cut, a killed backend)?
// Not part of the build: slonik is not a dependency. Run it in a scratch folder against a local PostgreSQL:
//   mkdir /tmp/slonik-repro && cd /tmp/slonik-repro && npm init -y && npm pkg set type=module
//   npm install slonik@49.10.9 pg && cp <repo>/scripts/repro/slonik-pool-cut.mjs repro.mjs
//   PATH=<repo>/.node/24.21.0/bin:$PATH node repro.mjs      # exit 1 when any scenario fails
// Env: PGHOST (127.0.0.1) PGPORT (5432) PGDATABASE (test) PGUSER (postgres)
//      POOL_SIZE (default 1)  POOL_ERROR_LISTENER=1 to attach pool.on('error')
// Result on 2026-11-25 (Node 24.21.0, slonik 49.10.9): A, A0, B, C, C0 pass; R passes only by waiting out
// gracefulTerminationTimeout; R15 and E fail (see docs/adr/0002-node-postgres-instead-of-slonik.md).
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createRequire } from "node:module";
import pg from "pg";
import { createPool, sql } from "slonik";

const require = createRequire(import.meta.url);
const SLONIK_VERSION = require("slonik/package.json").version;
const PG_VERSION = require("pg/package.json").version;

const PGHOST = process.env.PGHOST ?? "127.0.0.1";
const PGPORT = Number(process.env.PGPORT ?? 5432);
const PGDATABASE = process.env.PGDATABASE ?? "test";
const PGUSER = process.env.PGUSER ?? "postgres";
const POOL_SIZE = Number(process.env.POOL_SIZE ?? 1);
const POOL_ERROR_LISTENER = process.env.POOL_ERROR_LISTENER === "1";

// ---------------------------------------------------------------- process-level recorders
let currentScenario = "(none)";
const processEvents = []; // {scenario, kind, message}
const fmtErr = (e) =>
  e instanceof Error
    ? `${e.constructor?.name ?? "Error"}: ${e.message}${e.cause ? ` [cause: ${e.cause?.constructor?.name}: ${e.cause?.message}]` : ""}`
    : String(e);
process.on("uncaughtException", (error) => {
  processEvents.push({ scenario: currentScenario, kind: "uncaughtException", message: fmtErr(error) });
  console.log(`  !! uncaughtException during ${currentScenario}: ${fmtErr(error)}`);
});
process.on("unhandledRejection", (reason) => {
  processEvents.push({ scenario: currentScenario, kind: "unhandledRejection", message: fmtErr(reason) });
  console.log(`  !! unhandledRejection during ${currentScenario}: ${fmtErr(reason)}`);
});

// ---------------------------------------------------------------- helpers
const t0 = () => performance.now();
const ms = (start) => `${Math.round(performance.now() - start)} ms`;

/** Settle `promise` or give up after `timeoutMs`. Never rejects. */
const settle = async (promise, timeoutMs) => {
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ status: "hung" }), timeoutMs);
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ status: "fulfilled", value }),
        (error) => ({ status: "rejected", error }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
};

/** Minimal TCP proxy (node:net) that can be closed (killing every socket) and reopened on the same port. */
class Proxy {
  constructor(targetHost, targetPort, latencyMs = 0) {
    this.latencyMs = latencyMs; // one-way delay added to every chunk, both directions
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    this.sockets = new Set();
    this.server = null;
    this.port = 0;
  }
  async open(port = this.port) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.targetHost);
      this.sockets.add(client);
      this.sockets.add(upstream);
      const cleanup = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on("error", cleanup).on("close", cleanup);
      upstream.on("error", cleanup).on("close", cleanup);
      if (this.latencyMs > 0) {
        const forward = (from, to) =>
          from.on("data", (chunk) => setTimeout(() => to.destroyed || to.write(chunk), this.latencyMs));
        forward(client, upstream);
        forward(upstream, client);
      } else {
        client.pipe(upstream);
        upstream.pipe(client);
      }
    });
    await new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, "127.0.0.1", () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    this.port = this.server.address().port;
    return this.port;
  }
  async close() {
    const server = this.server;
    this.server = null;
    const closed = new Promise((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    await closed;
  }
}

const plainPg = async (fn) => {
  const client = new pg.Client({ host: PGHOST, port: PGPORT, user: PGUSER, database: PGDATABASE });
  client.on("error", () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
};

const makePool = async (port, extra = {}) => {
  const pool = await createPool(`postgres://${PGUSER}@${PGHOST}:${port}/${PGDATABASE}`, {
    connectionTimeout: 2_000,
    idleTimeout: 30_000, // keep the connection idle in the pool for the whole scenario
    maximumPoolSize: POOL_SIZE,
    statementTimeout: 30_000,
    idleInTransactionSessionTimeout: 30_000,
    ...extra,
  });
  const poolErrors = [];
  if (POOL_ERROR_LISTENER) {
    pool.on("error", (error) => poolErrors.push(fmtErr(error)));
  }
  return { pool, poolErrors };
};

const select1 = (pool) => pool.oneFirst(sql.unsafe`SELECT 1 AS one`);

/** Retry SELECT 1 until it succeeds or `budgetMs` passes. */
const retrySelect1 = async (pool, budgetMs = 8_000) => {
  const start = t0();
  const errors = [];
  let attempts = 0;
  while (performance.now() - start < budgetMs) {
    attempts++;
    const r = await settle(select1(pool), 5_000);
    if (r.status === "fulfilled" && r.value === 1) {
      return { ok: true, attempts, time: ms(start), errors };
    }
    errors.push(r.status === "hung" ? "HUNG (>5 s)" : fmtErr(r.error));
    await sleep(250);
  }
  return { ok: false, attempts, time: ms(start), errors };
};

const uniq = (list) => {
  const counts = new Map();
  for (const x of list) counts.set(x, (counts.get(x) ?? 0) + 1);
  return [...counts].map(([m, n]) => (n > 1 ? `${m} (x${n})` : m));
};

const endPool = async (pool, checks, log) => {
  log(`pool.state() before end: ${JSON.stringify(pool.state())}`);
  const start = t0();
  const ending = pool.end();
  const r = await settle(ending, 10_000);
  if (r.status === "fulfilled") {
    log(`pool.end() resolved in ${ms(start)}`);
  } else if (r.status === "rejected") {
    log(`pool.end() rejected in ${ms(start)}: ${fmtErr(r.error)}`);
    checks.push("pool.end() rejected");
  } else {
    log(`pool.end() did NOT resolve within 10 s; state: ${JSON.stringify(pool.state())}`);
    checks.push("pool.end() hung > 10 s");
    const late = await settle(ending, 30_000);
    log(`pool.end() eventually: ${late.status} after ${ms(start)}`);
  }
};

const results = [];

const runScenario = async (name, body) => {
  currentScenario = name;
  const before = processEvents.length;
  const checks = []; // failure reasons
  const lines = [];
  const log = (line) => {
    lines.push(line);
    console.log(`  [${name}] ${line}`);
  };
  const start = t0();
  console.log(`\n=== ${name}`);
  try {
    await body({ log, checks });
  } catch (error) {
    checks.push(`scenario threw: ${fmtErr(error)}`);
    log(`scenario threw: ${fmtErr(error)}`);
  }
  await sleep(1_000); // let late errors surface
  const events = processEvents.slice(before);
  for (const e of events) checks.push(`${e.kind}: ${e.message}`);
  const pass = checks.length === 0;
  const verdict = `${pass ? "PASS" : "FAIL"} ${name} (${ms(start)})${pass ? "" : " -- " + checks.join(" | ")}`;
  console.log(verdict);
  results.push(verdict);
};

// ---------------------------------------------------------------- scenarios

const waitForIdle = async (pool, timeoutMs = 5_000) => {
  const start = t0();
  while (performance.now() - start < timeoutMs) {
    const st = pool.state();
    if (st.idleConnections >= 1 && st.pendingReleaseConnections === 0) return true;
    await sleep(10);
  }
  return false;
};

/** Reopens the proxy, waits for SELECT 1 to work again, ends the pool and closes the proxy. */
const reopenAndEnd = async (proxy, port, pool, poolErrors, { log, checks }) => {
  await proxy.open(port);
  log(`proxy reopened on ${port}`);
  const again = await retrySelect1(pool);
  log(
    `SELECT 1 after reopen: ${again.ok ? "OK" : "FAILED"} after ${again.attempts} attempt(s) in ${again.time}` +
      (again.errors.length ? `; errors: ${uniq(again.errors).join(" ; ")}` : ""),
  );
  if (!again.ok) checks.push("SELECT 1 never recovered after reopen");

  await endPool(pool, checks, log);
  if (poolErrors.length) log(`pool 'error' events: ${uniq(poolErrors).join(" ; ")}`);
  await proxy.close();
};

/**
 * Proxy cut while the connection sits in the pool.
 * phase 'idle': cut once the connection is really IDLE (release, i.e. DISCARD ALL, finished).
 * phase 'release': proxy adds 50 ms one-way latency; cut 20 ms after SELECT 1 resolved, i.e. while
 *                  slonik's release step (resetConnection = DISCARD ALL) is still on the wire.
 */
const idleCut =
  (waitAfterCloseMs, phase = "idle", poolExtra = {}) =>
  async ({ log, checks }) => {
    const proxy = new Proxy(PGHOST, PGPORT, phase === "release" ? 50 : 0);
    const port = await proxy.open();
    const { pool, poolErrors } = await makePool(port, poolExtra);

    let start = t0();
    const first = await settle(select1(pool), 5_000);
    log(`SELECT 1 via proxy: ${first.status} ${first.value ?? fmtErr(first.error ?? "")} (${ms(start)})`);
    if (first.value !== 1) checks.push("initial SELECT 1 failed");
    if (phase === "idle") {
      if (!(await waitForIdle(pool))) checks.push("connection never became IDLE");
    } else {
      await sleep(20);
    }
    log(`pool.state() before cut: ${JSON.stringify(pool.state())}`);

    await proxy.close();
    log(`proxy closed, all sockets destroyed; waiting ${waitAfterCloseMs} ms`);
    await sleep(waitAfterCloseMs);
    log(`pool.state() after cut: ${JSON.stringify(pool.state())}`);

    start = t0();
    const down = await settle(select1(pool), 15_000);
    if (down.status === "rejected") {
      log(`SELECT 1 while proxy down: rejected in ${ms(start)} with ${fmtErr(down.error)}`);
    } else if (down.status === "hung") {
      log(`SELECT 1 while proxy down: HUNG > 15 s`);
      checks.push("SELECT 1 while down hung");
    } else {
      log(`SELECT 1 while proxy down: unexpectedly fulfilled (${down.value})`);
      checks.push("SELECT 1 while down fulfilled?!");
    }
    log(`pool.state() after failed query: ${JSON.stringify(pool.state())}`);

    await reopenAndEnd(proxy, port, pool, poolErrors, { log, checks });
  };

/** Proxy cut while SELECT pg_sleep(2) is in flight. */
const inFlightCut = async ({ log, checks }) => {
  const proxy = new Proxy(PGHOST, PGPORT);
  const port = await proxy.open();
  const { pool, poolErrors } = await makePool(port);

  let start = t0();
  const first = await settle(select1(pool), 5_000);
  log(`SELECT 1 via proxy: ${first.status} ${first.value ?? ""} (${ms(start)})`);
  if (first.value !== 1) checks.push("initial SELECT 1 failed");

  start = t0();
  const sleeping = settle(pool.query(sql.unsafe`SELECT pg_sleep(2)`), 15_000);
  await sleep(300);
  await proxy.close();
  log(`proxy closed 300 ms into pg_sleep(2)`);
  const inflight = await sleeping;
  if (inflight.status === "rejected") {
    log(`in-flight pg_sleep(2): rejected after ${ms(start)} with ${fmtErr(inflight.error)}`);
  } else if (inflight.status === "hung") {
    log(`in-flight pg_sleep(2): HUNG > 15 s`);
    checks.push("in-flight query hung");
  } else {
    log(`in-flight pg_sleep(2): unexpectedly fulfilled after ${ms(start)}`);
    checks.push("in-flight query fulfilled?!");
  }
  log(`pool.state() after in-flight failure: ${JSON.stringify(pool.state())}`);

  start = t0();
  const down = await settle(select1(pool), 15_000);
  if (down.status === "rejected") {
    log(`SELECT 1 while proxy down: rejected in ${ms(start)} with ${fmtErr(down.error)}`);
  } else {
    log(`SELECT 1 while proxy down: ${down.status}`);
    checks.push(`SELECT 1 while down ${down.status}`);
  }

  await reopenAndEnd(proxy, port, pool, poolErrors, { log, checks });
};

/** Backend killed with pg_terminate_backend (from a plain pg client) while idle in the pool. */
const terminateIdle =
  (waitAfterKillMs) =>
  async ({ log, checks }) => {
    const { pool, poolErrors } = await makePool(PGPORT); // direct, no proxy

    let start = t0();
    const pid = await pool.oneFirst(sql.unsafe`SELECT pg_backend_pid()`);
    log(`slonik backend pid ${pid} (${ms(start)})`);
    if (!(await waitForIdle(pool))) checks.push("connection never became IDLE");
    log(`pool.state() idle: ${JSON.stringify(pool.state())}`);

    const killed = await plainPg((c) => c.query("SELECT pg_terminate_backend($1) AS ok", [pid]));
    log(`pg_terminate_backend(${pid}) -> ${killed.rows[0].ok}; waiting ${waitAfterKillMs} ms`);
    await sleep(waitAfterKillMs);
    log(`pool.state() after kill: ${JSON.stringify(pool.state())}`);

    start = t0();
    const next = await settle(pool.oneFirst(sql.unsafe`SELECT pg_backend_pid()`), 15_000);
    if (next.status === "fulfilled") {
      log(`next query: fulfilled in ${ms(start)} on new backend pid ${next.value}`);
      if (next.value === pid) checks.push("query ran on the killed backend?!");
    } else if (next.status === "rejected") {
      log(`next query: rejected in ${ms(start)} with ${fmtErr(next.error)}`);
    } else {
      log("next query: HUNG > 15 s");
      checks.push("query after kill hung");
    }

    const again = await retrySelect1(pool);
    log(
      `SELECT 1 afterwards: ${again.ok ? "OK" : "FAILED"} after ${again.attempts} attempt(s) in ${again.time}` +
        (again.errors.length ? `; errors: ${uniq(again.errors).join(" ; ")}` : ""),
    );
    if (!again.ok) checks.push("SELECT 1 never recovered after kill");

    await endPool(pool, checks, log);
    if (poolErrors.length) log(`pool 'error' events: ${uniq(poolErrors).join(" ; ")}`);
  };

/**
 * Child process: same cut-during-release, then `await pool.end()` with nothing else keeping the event
 * loop alive (like a SIGTERM handler after server.close()). Exit code 13 = top-level await never settled.
 */
const childEnd = async () => {
  const proxy = new Proxy(PGHOST, PGPORT, 50);
  const port = await proxy.open();
  const { pool } = await makePool(port);
  await select1(pool);
  await sleep(20);
  await proxy.close();
  await sleep(200);
  console.log(`child: state before end ${JSON.stringify(pool.state())}`);
  const start = t0();
  await pool.end();
  console.log(`child: END_RESOLVED in ${ms(start)}`);
};

const endWithEmptyLoop = async ({ log, checks }) => {
  const { spawnSync } = await import("node:child_process");
  const start = t0();
  const child = spawnSync(process.execPath, [new URL(import.meta.url).pathname, "--child-end"], {
    encoding: "utf8",
    timeout: 30_000,
    env: process.env,
  });
  const out = `${child.stdout}${child.stderr}`.trim().split("\n").filter(Boolean);
  for (const line of out) log(`child> ${line}`);
  log(`child exit code ${child.status} signal ${child.signal} after ${ms(start)}`);
  if (!out.some((l) => l.includes("END_RESOLVED")))
    checks.push(`pool.end() never settled in child (exit ${child.status})`);
  if (out.some((l) => /uncaught|unhandled/i.test(l))) checks.push("child saw uncaught/unhandled");
};

// ---------------------------------------------------------------- main
if (process.argv[2] === "--child-end") {
  await childEnd();
  process.exit(0);
}

console.log(
  `node ${process.version}, slonik ${SLONIK_VERSION}, pg ${PG_VERSION}, pool size ${POOL_SIZE}, ` +
    `pool 'error' listener: ${POOL_ERROR_LISTENER ? "yes" : "no"}`,
);

await runScenario("A idle-cut (query 200 ms after cut)", idleCut(200));
await runScenario("A0 idle-cut (query immediately after cut)", idleCut(0));
await runScenario(
  "R cut during release/DISCARD ALL (default gracefulTerminationTimeout 5 s)",
  idleCut(200, "release"),
);
await runScenario(
  "R15 cut during release/DISCARD ALL (gracefulTerminationTimeout 15 s)",
  idleCut(200, "release", { gracefulTerminationTimeout: 15_000 }),
);
await runScenario("E end() after cut-during-release, empty event loop (child process)", endWithEmptyLoop);
await runScenario("B in-flight-cut (pg_sleep(2))", inFlightCut);
await runScenario("C pg_terminate_backend idle (query 200 ms after kill)", terminateIdle(200));
await runScenario("C0 pg_terminate_backend idle (query immediately after kill)", terminateIdle(0));

currentScenario = "(after all scenarios)";
await sleep(500);
console.log("\n=== SUMMARY");
for (const line of results) console.log(line);
const late = processEvents.filter((e) => e.scenario === "(after all scenarios)");
if (late.length)
  console.log(`FAIL late process events: ${late.map((e) => `${e.kind}: ${e.message}`).join(" | ")}`);
console.log(`active resources at exit: ${JSON.stringify(process.getActiveResourcesInfo())}`);
const failed = results.some((r) => r.startsWith("FAIL")) || late.length > 0;
console.log(failed ? "OVERALL: FAIL" : "OVERALL: PASS");
process.exit(failed ? 1 : 0);
