/**
 * The bus the suite runs against by default (ADR 0012): a nats-server of the run's own in operator mode
 * (the decentralized model of `make nats-auth`), requiring TLS with client certificates from a test CA.
 * Every service a test starts connects as its own user with the permissions the code declares for the
 * file's prefix (shared/runtime/src/nats-permissions.ts), the plugin registry mints plugin users with the
 * plugin signing key, and a test's own clients connect as a user without limits (they inject faults: a
 * consumer deleted, a bucket purged). Users are signed by the account's signing key, so each file mints
 * its own without reloading the server.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { encodeUser, fmtCreds } from "@nats-io/jwt";
import { nativeCreateUser, nativeFromSeed } from "@svc/bus";
import type { ServiceName } from "@svc/contracts";

import { makeMutualTls, TEST_SERVER_NAME } from "../../scripts/lib/test-ca.js";
import { writeDecentralizedAuth, writeServiceCreds } from "../../scripts/nats-auth.js";
import { OwnNatsServer } from "./nats-server.js";

/** What the global setup hands each file about the secure bus (files in `dir` by fixed names). */
export interface SecureBus {
  readonly dir: string;
  readonly url: string;
}

/**
 * Starts the run's secure nats-server; `stop` kills it, removes its store and returns the permission
 * violations the server logged (tests that attack the bus cause some; a service's user that misses a
 * permission shows up here too).
 */
export async function startSecureBus(): Promise<{ bus: SecureBus; stop: () => Promise<string[]> }> {
  const dir = mkdtempSync(join(tmpdir(), "svc-test-bus-"));
  // The services' users this writes are for a prefix no file uses: each file mints its own.
  const conf = await writeDecentralizedAuth(dir, "unused", "UNUSED");
  const tls = makeMutualTls(dir);
  const server = new OwnNatsServer();
  await server.start(`${readFileSync(conf, "utf8")}\n${tls}`);
  return {
    bus: { dir, url: `tls://127.0.0.1:${server.port}` },
    stop: async () => {
      const violations = server.log().filter((line) => line.includes("Permissions Violation"));
      await server.dispose();
      // Its keys and every file's users (written under it): nothing secret is left in /tmp.
      rmSync(dir, { recursive: true, force: true });
      return violations;
    },
  };
}

const seed = (file: string) => nativeFromSeed(readFileSync(file, "utf8").trim());

/** The settings that carry NATS credentials and TLS: dropped when a test points a service at its own server. */
export const BUS_SETTINGS = [
  "NATS_CREDS_FILE",
  "NATS_NKEY_SEED_FILE",
  "NATS_TOKEN",
  "NATS_USER",
  "NATS_PASSWORD",
  "NATS_PASSWORD_FILE",
  "NATS_TLS_CA_FILE",
  "NATS_TLS_CERT_FILE",
  "NATS_TLS_KEY_FILE",
  "NATS_TLS_SERVER_NAME",
  "NATS_PLUGIN_SIGNING_KEY_FILE",
  "NATS_PLUGIN_ACCOUNT",
  "NATS_PLUGIN_NKEY_SEED_FILE",
  "NATS_PLUGIN_TLS_CERT_FILE",
  "NATS_PLUGIN_TLS_KEY_FILE",
] as const;

/**
 * One file's users on the secure bus: `env`, what every process of the file connects with (TLS, the
 * plugin registry's minting key, and the unlimited test user), and `serviceCreds(service, prefix,
 * stream)`, the `.creds` of a service's own user for a prefix (minted once per prefix).
 */
export async function fileUsers(bus: SecureBus): Promise<{
  env: Record<string, string>;
  serviceCreds: (service: ServiceName, prefix: string, stream: string) => Promise<string>;
}> {
  // Under the bus's directory, removed with it when the run stops the bus.
  const out = mkdtempSync(join(bus.dir, "users-"));
  const signer = seed(join(bus.dir, "account-signing.nk"));
  const account = readFileSync(join(bus.dir, "account.pub"), "utf8").trim();
  const user = nativeCreateUser();
  const testCreds = join(out, "test.creds");
  // No permission lists: the test's own clients read and write everything of the account.
  writeFileSync(
    testCreds,
    fmtCreds(await encodeUser("test", user, signer, { issuer_account: account }), user),
    {
      mode: 0o600,
    },
  );
  const minted = new Map<string, Promise<Record<ServiceName, string>>>();
  return {
    env: {
      NATS_URL: bus.url,
      NATS_CREDS_FILE: testCreds,
      NATS_TLS_CA_FILE: join(bus.dir, "ca.pem"),
      NATS_TLS_CERT_FILE: join(bus.dir, "client.pem"),
      NATS_TLS_KEY_FILE: join(bus.dir, "client.key"),
      NATS_TLS_SERVER_NAME: TEST_SERVER_NAME,
      NATS_PLUGIN_SIGNING_KEY_FILE: join(bus.dir, "plugin-signing.nk"),
      NATS_PLUGIN_ACCOUNT: account,
      NATS_PLUGIN_TLS_CERT_FILE: join(bus.dir, "plugin.pem"),
      NATS_PLUGIN_TLS_KEY_FILE: join(bus.dir, "plugin.key"),
    },
    async serviceCreds(service, prefix, stream) {
      const key = `${prefix} ${stream}`;
      let files = minted.get(key);
      if (files === undefined) {
        const dir = join(out, String(minted.size));
        mkdirSync(dir, { mode: 0o700 });
        files = writeServiceCreds(dir, signer, account, prefix, stream);
        minted.set(key, files);
      }
      return (await files)[service];
    },
  };
}
