/**
 * `make nats-auth`: writes the NATS authorization for the platform's services, from the
 * permissions the code declares (shared/runtime/src/nats-permissions.ts). The static model: one nkey user
 * per service; the output folder gets `nats-auth.conf` (include it in the nats-server configuration) and
 * `<service>.nk`, each service's seed (mode 0600: give each service only its own, e.g. as the chart's
 * `nats.auth.type: nkey` Secret). Seeds already in the folder are kept, so running it again after a code
 * change updates the permissions without new credentials.
 *
 * With `--model decentralized`: an operator, one account (JetStream enabled) with a signing key, and a user
 * JWT per service signed by it, with the same permissions; the folder gets `nats-operator.conf` (operator
 * mode with the memory resolver, the account preloaded), `<service>.creds` for each service
 * (NATS_CREDS_FILE), and the operator's, account's and signing key's seeds (`*.nk`: keep them offline;
 * the signing key is what issues and rotates users). A second signing key of the account,
 * `plugin-signing.nk`, is the plugin registry's (NATS_PLUGIN_SIGNING_KEY_FILE, with the account's public
 * key from `account.pub` as NATS_PLUGIN_ACCOUNT): with it the registry mints a short-lived user per plugin
 * activation and for external backends. A new run makes new keys.
 *
 * The static model also writes `plugins.nk`, the one user all plugin processes share
 * (NATS_PLUGIN_NKEY_SEED_FILE of the registry).
 *
 * Usage: node --import tsx scripts/nats-auth.ts [--out <dir>] [--prefix svc] [--events-stream SVC_EVENTS]
 *          [--model static|decentralized]
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { encodeAccount, encodeOperator, encodeUser, fmtCreds } from "@nats-io/jwt";
import { type KeyPair, Prefix } from "@nats-io/nkeys";
import { nativeCreatePair, nativeCreateUser, nativeFromSeed } from "@svc/bus";
import type { ServiceName } from "@svc/contracts";
import { SERVICE_NEEDS, servicePermissions, staticAuthorization, userPermissions } from "@svc/runtime";

const seedText = (pair: KeyPair) => `${new TextDecoder().decode(pair.getSeed())}\n`;

/**
 * A `.creds` per service, each user signed by `signer` (one of the account's signing keys) with the
 * permissions of that service for `prefix` and `eventsStream`; `<file name>` → path. No server reload is
 * needed: a server in operator mode trusts any user its account's signing key signs.
 */
export async function writeServiceCreds(
  out: string,
  signer: KeyPair,
  accountPublicKey: string,
  prefix: string,
  eventsStream: string,
  fileName: (service: ServiceName) => string = (service) => `${service}.creds`,
): Promise<Record<ServiceName, string>> {
  const files = {} as Record<ServiceName, string>;
  for (const service of Object.keys(SERVICE_NEEDS) as ServiceName[]) {
    // Node's Ed25519: the library's JavaScript one takes tens of milliseconds per user.
    const user = nativeCreateUser();
    const jwt = await encodeUser(service, user, signer, {
      issuer_account: accountPublicKey,
      ...userPermissions(servicePermissions(service, { prefix, eventsStream })),
    });
    files[service] = join(out, fileName(service));
    writeFileSync(files[service], fmtCreds(jwt, user), { mode: 0o600 });
  }
  return files;
}

/**
 * The decentralized model: writes the operator configuration, a `.creds` per service and the keys; returns
 * the configuration's path.
 */
export async function writeDecentralizedAuth(
  out: string,
  prefix: string,
  eventsStream: string,
): Promise<string> {
  mkdirSync(out, { recursive: true, mode: 0o700 });
  // Node's Ed25519 (the library's JavaScript one takes milliseconds per signature).
  const operator = nativeCreatePair(Prefix.Operator);
  const system = nativeCreatePair(Prefix.Account);
  const account = nativeCreatePair(Prefix.Account);
  const signer = nativeCreatePair(Prefix.Account);
  const pluginSigner = nativeCreatePair(Prefix.Account);
  // JetStream in operator mode needs the server's system account.
  const operatorJwt = await encodeOperator("svc-operator", operator, {
    system_account: system.getPublicKey(),
  });
  const systemJwt = await encodeAccount("SYS", system, {}, { signer: operator });
  const accountJwt = await encodeAccount(
    "svc",
    account,
    {
      // No limits of the account's own (-1: unlimited); JetStream on. Set limits here to cap a deployment.
      limits: {
        conn: -1,
        subs: -1,
        data: -1,
        payload: -1,
        imports: -1,
        exports: -1,
        leaf: -1,
        wildcards: true,
        mem_storage: -1,
        disk_storage: -1,
        streams: -1,
        consumer: -1,
      },
      signing_keys: [signer.getPublicKey(), pluginSigner.getPublicKey()],
    },
    { signer: operator },
  );
  await writeServiceCreds(out, signer, account.getPublicKey(), prefix, eventsStream);
  writeFileSync(join(out, "operator.nk"), seedText(operator), { mode: 0o600 });
  writeFileSync(join(out, "account.nk"), seedText(account), { mode: 0o600 });
  writeFileSync(join(out, "account-signing.nk"), seedText(signer), { mode: 0o600 });
  writeFileSync(join(out, "plugin-signing.nk"), seedText(pluginSigner), { mode: 0o600 });
  writeFileSync(join(out, "account.pub"), `${account.getPublicKey()}\n`, { mode: 0o644 });
  const conf = join(out, "nats-operator.conf");
  writeFileSync(
    conf,
    [
      `# Generated by make nats-auth MODEL=decentralized for prefix '${prefix}'.`,
      `operator: ${operatorJwt}`,
      `system_account: ${system.getPublicKey()}`,
      "# A user JWT carries its permission lists in the CONNECT line: more than the default 4 KB.",
      "max_control_line: 65536",
      "resolver: MEMORY",
      "resolver_preload: {",
      `  ${system.getPublicKey()}: ${systemJwt}`,
      `  ${account.getPublicKey()}: ${accountJwt}`,
      "}",
      "",
    ].join("\n"),
    { mode: 0o644 },
  );
  return conf;
}

/** Writes the configuration and the seeds into `out`; returns the configuration's path. */
export function writeNatsAuth(out: string, prefix: string, eventsStream: string): string {
  mkdirSync(out, { recursive: true, mode: 0o700 });
  const publicKeys = {} as Record<ServiceName | "plugins", string>;
  for (const service of [...(Object.keys(SERVICE_NEEDS) as ServiceName[]), "plugins" as const]) {
    const file = join(out, `${service}.nk`);
    const pair = existsSync(file) ? nativeFromSeed(readFileSync(file, "utf8").trim()) : nativeCreateUser();
    if (!existsSync(file))
      writeFileSync(file, `${new TextDecoder().decode(pair.getSeed())}\n`, { mode: 0o600 });
    publicKeys[service] = pair.getPublicKey();
  }
  const conf = join(out, "nats-auth.conf");
  writeFileSync(conf, staticAuthorization({ prefix, eventsStream }, publicKeys), { mode: 0o644 });
  return conf;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      out: { type: "string", default: "nats-auth" },
      prefix: { type: "string", default: process.env.SVC_SUBJECT_PREFIX ?? "svc" },
      "events-stream": { type: "string", default: process.env.SVC_EVENTS_STREAM ?? "SVC_EVENTS" },
      model: { type: "string", default: "static" },
    },
  });
  const conf =
    values.model === "decentralized"
      ? await writeDecentralizedAuth(resolve(values.out), values.prefix, values["events-stream"])
      : writeNatsAuth(resolve(values.out), values.prefix, values["events-stream"]);
  process.stdout.write(
    values.model === "decentralized"
      ? `wrote ${conf} and a .creds per service (${Object.keys(SERVICE_NEEDS).join(", ")}); start nats-server with the file, give each service NATS_CREDS_FILE=<its .creds>, and the plugin registry NATS_PLUGIN_SIGNING_KEY_FILE=plugin-signing.nk and NATS_PLUGIN_ACCOUNT=<account.pub>\n`
      : `wrote ${conf} and a seed per service (${Object.keys(SERVICE_NEEDS).join(", ")}) and for the plugins; include the file in the nats-server configuration, give each service NATS_NKEY_SEED_FILE=<its .nk>, and the plugin registry NATS_PLUGIN_NKEY_SEED_FILE=plugins.nk\n`,
  );
}
