/**
 * `make nats-auth` (issue 23, item 2): writes the NATS authorization for the platform's services, from the
 * permissions the code declares (shared/runtime/src/nats-permissions.ts). The static model: one nkey user
 * per service; the output folder gets `nats-auth.conf` (include it in the nats-server configuration) and
 * `<service>.nk`, each service's seed (mode 0600: give each service only its own, e.g. as the chart's
 * `nats.auth.type: nkey` Secret). Seeds already in the folder are kept, so running it again after a code
 * change updates the permissions without new credentials.
 *
 * Usage: node --import tsx scripts/nats-auth.ts [--out <dir>] [--prefix svc] [--events-stream SVC_EVENTS]
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { createUser, fromSeed } from "@nats-io/nkeys";
import type { ServiceName } from "@svc/contracts";
import { SERVICE_NEEDS, staticAuthorization } from "@svc/runtime";

const { values } = parseArgs({
  options: {
    out: { type: "string", default: "nats-auth" },
    prefix: { type: "string", default: process.env.SVC_SUBJECT_PREFIX ?? "svc" },
    "events-stream": { type: "string", default: process.env.SVC_EVENTS_STREAM ?? "SVC_EVENTS" },
  },
});

/** Writes the configuration and the seeds into `out`; returns the configuration's path. */
export function writeNatsAuth(out: string, prefix: string, eventsStream: string): string {
  mkdirSync(out, { recursive: true, mode: 0o700 });
  const publicKeys = {} as Record<ServiceName, string>;
  for (const service of Object.keys(SERVICE_NEEDS) as ServiceName[]) {
    const file = join(out, `${service}.nk`);
    const pair = existsSync(file)
      ? fromSeed(new TextEncoder().encode(readFileSync(file, "utf8").trim()))
      : createUser();
    if (!existsSync(file))
      writeFileSync(file, `${new TextDecoder().decode(pair.getSeed())}\n`, { mode: 0o600 });
    publicKeys[service] = pair.getPublicKey();
  }
  const conf = join(out, "nats-auth.conf");
  writeFileSync(conf, staticAuthorization({ prefix, eventsStream }, publicKeys), { mode: 0o644 });
  return conf;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const conf = writeNatsAuth(resolve(values.out), values.prefix, values["events-stream"]);
  process.stdout.write(
    `wrote ${conf} and a seed per service (${Object.keys(SERVICE_NEEDS).join(", ")}); include the file in the nats-server configuration and give each service NATS_NKEY_SEED_FILE=<its .nk>\n`,
  );
}
