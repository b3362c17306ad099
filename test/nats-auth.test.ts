/**
 * Every process connects the way production NATS expects. A nats-server of the test's own
 * requires TLS with client certificates (a test CA made with openssl) and a user and password; the
 * services, the plugin runtime's processes included, connect with NATS_URL=tls://…, NATS_USER,
 * NATS_PASSWORD_FILE and NATS_TLS_*, and the main flows work: sign-in, operator routes, a plugin installed,
 * activated and answering its route from its own process (which connects as the plugins' own user with
 * their own client certificate, never the registry's). A client with no credentials, or the wrong
 * ones, is refused; a service given wrong credentials exits with status 78, naming why. An nkey seed and
 * a token connect too.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createUser } from "@nats-io/nkeys";
import { connect } from "@nats-io/transport-node";
import { connectNats, isNatsAuthError } from "@svc/bus";
import { createLogger } from "@svc/observability";
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
import { makeMutualTls } from "../scripts/lib/test-ca.js";
import { fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { installAndGreet } from "./support/example-plugin-flow.js";
import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { OwnNatsServer } from "./support/nats-server.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
const dir = mkdtempSync(join(tmpdir(), "svc-nats-auth-"));
const nats = new OwnNatsServer();
const PASSWORD = "a-long-nats-password-for-tests";
const seedUser = createUser();
/** The plugin processes' own user and client certificate (never the registry's). */
const pluginUser = createUser();
const file = (name: string) => join(dir, name);

let env: Record<string, string>;
let base: string;
let operator: string;

beforeAll(async () => {
  // A test CA, the server's certificate for `nats.test` and client certificates, made with openssl.
  const tls = makeMutualTls(dir);
  writeFileSync(file("password"), `${PASSWORD}\n`);
  writeFileSync(file("seed"), new TextDecoder().decode(seedUser.getSeed()));
  await nats.start(`
${tls}
authorization {
  users = [
    { user: svc, password: "${PASSWORD}" }
    { nkey: ${seedUser.getPublicKey()} }
    { nkey: ${pluginUser.getPublicKey()}, permissions: { subscribe: ["${h.env.SVC_SUBJECT_PREFIX as string}.plugins.*.http"], publish: { deny: [">"] }, allow_responses: true } }
  ]
}
`);
  env = {
    ...pluginStackEnv(dir, { dev: true, tests: fixtureSigner() }),
    BackendHost__RateLimitApiPerMinute: "0",
    BackendHost__RateLimitAuthPerMinute: "0",
    BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    NATS_URL: `tls://127.0.0.1:${nats.port}`,
    NATS_USER: "svc",
    NATS_PASSWORD_FILE: file("password"),
    NATS_TLS_CA_FILE: file("ca.pem"),
    NATS_TLS_CERT_FILE: file("client.pem"),
    NATS_TLS_KEY_FILE: file("client.key"),
    NATS_TLS_SERVER_NAME: "nats.test",
  };
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  writeFileSync(file("plugins.nk"), new TextDecoder().decode(pluginUser.getSeed()));
  await h.start(pluginRegistryService, {
    ...env,
    NATS_PLUGIN_NKEY_SEED_FILE: file("plugins.nk"),
    NATS_PLUGIN_TLS_CERT_FILE: file("plugin.pem"),
    NATS_PLUGIN_TLS_KEY_FILE: file("plugin.key"),
  });
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
}, 60_000);

afterAll(async () => {
  await h.stopAll();
  await nats.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const tlsOptions = () => ({
  caFile: file("ca.pem"),
  certFile: file("client.pem"),
  keyFile: file("client.key"),
  servername: "nats.test",
});

describe("a NATS server that requires TLS and credentials", () => {
  it("runs sign-in, operator routes and a plugin's route over it", async () => {
    const api = bearerApi(() => base);
    const created = await api("POST", "/api/users", operator, {
      userName: "tls-user",
      password: "a long password",
    });
    expect(created.status, created.text).toBe(201);
    const signIn = await api("POST", "/api/auth/login", null, {
      username: "tls-user",
      password: "a long password",
    });
    expect(signIn.status, signIn.text).toBe(200);
    expect((await api("POST", "/api/tenants", operator, { tenantKey: "tls", name: "TLS" })).status).toBe(201);
    // A plugin: installed, activated, and answering from its own process, which connects over TLS too.
    await installAndGreet(base, operator);
  }, 60_000);

  it("refuses a client without credentials, with the wrong password, or without a client certificate", async () => {
    const attempt = async (options: Record<string, unknown>) => {
      try {
        const nc = await connect({ servers: `tls://127.0.0.1:${nats.port}`, reconnect: false, ...options });
        await nc.close();
        return "connected";
      } catch (error) {
        return isNatsAuthError(error) ? "refused" : `failed: ${(error as Error).message}`;
      }
    };
    expect(await attempt({ tls: tlsOptions() })).toBe("refused");
    expect(await attempt({ tls: tlsOptions(), user: "svc", pass: "wrong" })).toBe("refused");
    expect(
      await attempt({
        tls: { caFile: file("ca.pem"), servername: "nats.test" },
        user: "svc",
        pass: PASSWORD,
      }),
    ).toMatch(/refused|failed/);
    expect(await attempt({ tls: tlsOptions(), user: "svc", pass: PASSWORD })).toBe("connected");
  });

  it("connects with an nkey seed file", async () => {
    const nc = await connectNats({
      url: `tls://127.0.0.1:${nats.port}`,
      name: "nkey-test",
      logger: createLogger("t", "silent"),
      auth: { nkeySeedFile: file("seed"), tls: { ...tlsOptions(), serverName: "nats.test" } },
    });
    await nc.flush();
    await nc.close();
  });

  it("connects with a token, and a wrong token is refused", async () => {
    const tokenServer = new OwnNatsServer();
    await tokenServer.start(`authorization { token: "a-long-nats-token-for-tests" }`);
    try {
      const attempt = (token: string) =>
        connectNats({
          url: tokenServer.url,
          name: "token-test",
          logger: createLogger("t", "silent"),
          auth: { token },
        });
      const nc = await attempt("a-long-nats-token-for-tests");
      await nc.flush();
      await nc.close();
      await expect(attempt("not-the-token")).rejects.toSatisfy(isNatsAuthError);
    } finally {
      await tokenServer.dispose();
    }
  });

  it("a service given the wrong password exits with status 78, naming why", async () => {
    writeFileSync(file("wrong"), "not-the-password\n");
    const child = spawn(process.execPath, ["--import", "tsx", "services/resolver/src/main.ts"], {
      cwd: repoRoot,
      env: { ...process.env, ...h.envWith(env), NATS_PASSWORD_FILE: file("wrong"), LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(78);
    expect(output).toMatch(/NATS refused this process's credentials/);
    expect(output).not.toContain("not-the-password");
  }, 30_000);
});
