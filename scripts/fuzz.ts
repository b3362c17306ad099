/**
 * `make fuzz`: the whole stack in this process (all six services) on its own database, subject prefix and
 * events stream, on the running NATS and PostgreSQL; then the fuzzer of test/support/fuzz.ts for a bounded
 * time, printing its figures. Exit status 1 when any request failed (5xx other than a documented 503, a
 * hang over 5 s, an error that is not a problem document), 2 when the run itself failed.
 *
 * Options: --seconds N (default 60), --requests N (default 50000), --seed N (default: new each run,
 * printed), --concurrency N (default 8).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { parseArgs } from "node:util";

import { CORE_PERMISSION_KEYS } from "@svc/access";
import { parseConfig } from "@svc/config";
import { createLogger } from "@svc/observability";
import { type RunningService, startService } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";

import { formatReport, fuzzCallers, runFuzz } from "../test/support/fuzz.js";
import { signToken } from "../test/support/sign.js";
import { dropRunResources, migrateAll, seedDemo } from "./lib/stack.js";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    requests: { type: "string", default: "50000" },
    seed: { type: "string" },
    concurrency: { type: "string", default: "8" },
  },
});
const seed = args.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(args.seed);
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
  await dropRunResources({ serverUrl: serverUrl.toString(), database: dbName, natsUrl, stream });
}

let exitCode = 2;
const overall = setTimeout(
  () => {
    log("overall deadline passed; stopping");
    void cleanup().finally(() => process.exit(2));
  },
  (Number(args.seconds) + 120) * 1_000,
);
try {
  await migrateAll(dbUrl.toString());
  await seedDemo(dbUrl.toString());
  const config = parseConfig({
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    DATABASE_URL: dbUrl.toString(),
    NATS_URL: natsUrl,
    SVC_SUBJECT_PREFIX: `fuzz${stamp}`,
    SVC_EVENTS_STREAM: stream,
    GATEWAY_HOST: "127.0.0.1",
    GATEWAY_PORT: "0",
    DATABASE_POOL_SIZE: "4",
    BackendHost__JwtSigningKey: signingKey,
    BackendHost__SecretsEncryptionKey: randomBytes(32).toString("base64"),
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__EnableBootstrapApiKeys: "true",
    BackendHost__ApiKeys__0: API_KEY,
  });
  for (const definition of [
    resolverService,
    rbacService,
    pluginRegistryService,
    webhookDispatcherService,
    jobReaperService,
    gatewayService,
  ]) {
    running.push(
      await startService(definition, config, {
        logger: createLogger(definition.name, "silent"),
        processMetrics: false,
      }),
    );
  }
  const base = running.at(-1)?.hooks.httpAddress as string;
  const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as Parameters<
    typeof runFuzz
  >[0]["openapi"];
  log(`stack up at ${base}; seed ${seed} (repeat with --seed ${seed}); ${args.seconds} s at most`);
  const report = await runFuzz({
    base,
    openapi,
    callers: await fuzzCallers((o) => signToken(signingKey, o), API_KEY, CORE_PERMISSION_KEYS),
    seed,
    requests: Number(args.requests),
    seconds: Number(args.seconds),
    concurrency: Number(args.concurrency),
  });
  console.log(formatReport(report));
  exitCode = report.failures.length === 0 ? 0 : 1;
} catch (error) {
  log(`the run failed: ${(error as Error).stack ?? String(error)}`);
} finally {
  clearTimeout(overall);
  await cleanup();
}
process.exit(exitCode);
