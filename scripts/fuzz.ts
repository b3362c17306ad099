/**
 * `make fuzz`: the whole stack in this process (all six services) on its own database,
 * subject prefix and events stream, on the running NATS and PostgreSQL; then the fuzzer of test/fuzz/ for a
 * bounded time: requests generated from the gateway's OpenAPI description and the public routes, valid and
 * mutated, for every kind of caller. Prints its figures and every distinct failure with what reproduces it;
 * the failing requests in full go to a JSON file (path printed).
 *
 * Exit status 1 when any request failed (5xx other than a documented 503, a hang over 5 s, no answer, an
 * authorisation bypass, a broken route contract, an error that is not a problem document or shows
 * internals), 2 when the run itself failed.
 *
 * Options: --seconds N (default 60), --requests N (default 50000), --seed N (default: new each run,
 * printed), --concurrency N (default 8), --rounds N (default 4: known identifiers are harvested again
 * before each), --out FILE (the failures in full; default in the system's temporary directory), --dump FILE
 * (every request and its answer's status, one JSON line each), --log-level LEVEL (the services' pino logs,
 * on stdout, e.g. `error` to see the stack behind a 500; default silent).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { CORE_PERMISSION_KEYS } from "@svc/access";
import { parseConfig } from "@svc/config";
import { createLogger } from "@svc/observability";
import { type RunningService, type ServiceDefinition, startService } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";

import { demoConstants, fuzzCallers } from "../test/fuzz/callers.js";
import type { OpenApi } from "../test/fuzz/generate.js";
import { describeRequest, formatReport, runFuzz } from "../test/fuzz/run.js";
import { ALL_SERVICE_SETTINGS } from "./lib/service-settings.js";
import { DEMO, dropRunResources, migrateAll, seedDemo } from "./lib/stack.js";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    requests: { type: "string", default: "50000" },
    seed: { type: "string" },
    concurrency: { type: "string", default: "8" },
    rounds: { type: "string", default: "4" },
    out: { type: "string" },
    dump: { type: "string" },
    "log-level": { type: "string", default: "silent" },
  },
});
const numberArg = (name: string, value: string | undefined) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) {
    process.stderr.write(`[fuzz] --${name} must be a non-negative integer, not ${String(value)}\n`);
    process.exit(2);
  }
  return n;
};
const seed = args.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : numberArg("seed", args.seed);
const seconds = numberArg("seconds", args.seconds);
const requests = numberArg("requests", args.requests);
const concurrency = Math.max(1, numberArg("concurrency", args.concurrency));
const rounds = Math.max(1, numberArg("rounds", args.rounds));
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const stamp = Date.now().toString(36);
const dbName = `svc_fuzz_${stamp}`;
const dbUrl = new URL(serverUrl);
dbUrl.pathname = `/${dbName}`;
const stream = `SVC_EVENTS_FUZZ${stamp.toUpperCase()}`;
const API_KEY = randomBytes(24).toString("base64url");
const signingKey = generateKeyPairSync("ec", { namedCurve: "P-256" })
  .privateKey.export({ type: "pkcs8", format: "pem" })
  .toString();

const log = (message: string) => process.stderr.write(`[fuzz] ${message}\n`);
const running: RunningService[] = [];

async function cleanup() {
  await Promise.allSettled(running.map((s) => s.stop()));
  await dropRunResources({
    serverUrl: serverUrl.toString(),
    database: dbName,
    natsUrl,
    stream,
    prefix: `fuzz${stamp}`,
  });
}

let exitCode = 2;
const overall = setTimeout(
  () => {
    log("overall deadline passed; stopping");
    void cleanup().finally(() => process.exit(2));
  },
  (seconds + 180) * 1_000,
);
try {
  await migrateAll(dbUrl.toString());
  await seedDemo(dbUrl.toString(), { withAdmin: true });
  const config = parseConfig(
    {
      NODE_ENV: "test",
      LOG_LEVEL: args["log-level"],
      DATABASE_URL: dbUrl.toString(),
      NATS_URL: natsUrl,
      SVC_SUBJECT_PREFIX: `fuzz${stamp}`,
      SVC_EVENTS_STREAM: stream,
      GATEWAY_HOST: "127.0.0.1",
      GATEWAY_PORT: "0",
      DATABASE_POOL_SIZE: "4",
      SHUTDOWN_DRAIN_DELAY_MS: "0",
      BackendHost__JwtSigningKey: signingKey,
      BackendHost__SecretsEncryptionKey: randomBytes(32).toString("base64"),
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__RateLimitAuthPerMinute: "0",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
      BackendHost__EnableBootstrapApiKeys: "true",
      BackendHost__ApiKeys__0: API_KEY,
    },
    { settings: ALL_SERVICE_SETTINGS },
  );
  const services: readonly ServiceDefinition[] = [
    resolverService,
    rbacService,
    pluginRegistryService,
    webhookDispatcherService,
    jobReaperService,
    gatewayService,
  ];
  for (const definition of services) {
    running.push(
      await startService(definition, config, {
        logger: createLogger(definition.name, config.logLevel),
        processMetrics: false,
      }),
    );
  }
  const base = running.at(-1)?.hooks.httpAddress as string;
  const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as OpenApi;
  const { callers, badAuth } = await fuzzCallers({
    signingKey,
    apiKey: API_KEY,
    allKeys: CORE_PERMISSION_KEYS,
    workspaceKey: DEMO.workspaceKey,
  });
  log(`stack up at ${base}; seed ${seed} (repeat with --seed ${seed}); ${seconds} s at most`);
  const dump = args.dump === undefined ? undefined : createWriteStream(args.dump);
  const report = await runFuzz({
    base,
    openapi,
    callers,
    badAuth,
    operator: callers.find((c) => c.name === "superadmin") as (typeof callers)[number],
    constants: demoConstants(DEMO),
    seed,
    requests,
    seconds,
    concurrency,
    rounds,
    log,
    ...(dump
      ? {
          onOutcome: ({ request: r, answer: a, failure }) =>
            dump.write(
              `${JSON.stringify({
                target: r.target,
                method: r.method,
                path: r.path.slice(0, 300),
                caller: r.caller,
                mutation: r.mutation,
                variant: r.variant,
                status: a.status,
                ms: a.ms,
                ...(failure ? { failure } : {}),
              })}\n`,
            ),
        }
      : {}),
  });
  await new Promise<void>((resolve) => (dump ? dump.end(resolve) : resolve()));
  console.log(formatReport(report));
  if (report.failures.length > 0) {
    const file = args.out ?? join(tmpdir(), `svc-fuzz-${seed}-failures.json`);
    const full = report.failures.map((f) => ({
      failure: f.failure,
      summary: describeRequest(f.request),
      request: { ...f.request, body: f.request.body?.slice(0, 200_000) },
      status: f.answer.status,
      contentType: f.answer.contentType,
      ms: f.answer.ms,
      answer: f.answer.body.slice(0, 4_000),
    }));
    await writeFile(file, JSON.stringify(full, null, 2));
    log(`the ${report.failures.length} failing requests in full: ${file}`);
  }
  exitCode = report.failures.length === 0 ? 0 : 1;
} catch (error) {
  log(`the run failed: ${(error as Error).stack ?? String(error)}`);
} finally {
  clearTimeout(overall);
  await cleanup();
}
process.exit(exitCode);
