/**
 * Least privilege per service. `make nats-auth` writes one user per service with the
 * permissions the code declares (shared/runtime/src/nats-permissions.ts), in both models: an nkey user per
 * service in an `authorization` block, and operator mode (an account with a signing key, a user JWT and a
 * `.creds` file per service). A nats-server of the test's own runs with each configuration in turn and each
 * service connects as its own user. The main flows pass
 * (sign-in, operator routes of every service, a plugin installed, activated and answering, an event
 * delivered to a webhook receiver); a client with no credentials is refused, and a service's user trying
 * a subject outside its list is refused by the server: the gateway answering rbac's JWKS subject, the
 * dispatcher forging a broadcast, writing the revocation bucket or purging it.
 *
 * The decentralized run's server also requires TLS with client certificates (a test CA made with openssl):
 * the main flows run with authentication, TLS and permissions at once.
 *
 * The plugin processes never use the registry's credentials. With static auth they are the one
 * plugins user; with decentralized auth the registry mints a user per activation (here living 5 s, so the
 * plugin is seen answering after a renewal). A plugin's user may take its own route subject and publish
 * only its declared events (decentralized) or nothing (static); everything else is refused by the server.
 * A plugin user that may not take its route (a misconfigured seed) makes the activation fail, said with
 * the plugin's id, and the platform goes on.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { jetstream } from "@nats-io/jetstream";
import {
  connect,
  credsAuthenticator,
  type NatsConnection,
  nkeyAuthenticator,
  type PermissionViolationError,
} from "@nats-io/transport-node";
import { isNatsAuthError, nativeFromSeed, parseCreds } from "@svc/bus";
import { pluginInboxPrefix, SHARED_PLUGIN_INBOX } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { makeMutualTls } from "../scripts/lib/test-ca.js";
import { writeDecentralizedAuth, writeNatsAuth } from "../scripts/nats-auth.js";
import { PluginCredentials } from "../services/plugin-registry/src/runtime/plugin-credentials.js";
import { WorkerPool } from "../services/plugin-registry/src/runtime/worker-host.js";
import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { installAndGreet } from "./support/example-plugin-flow.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, installPackage } from "./support/http.js";
import { OwnNatsServer } from "./support/nats-server.js";
import { startPluginHost } from "./support/plugin-host.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { eventually, until } from "./support/wait.js";

const h = await createHarness();
const prefix = h.env.SVC_SUBJECT_PREFIX as string;
const stream = h.env.SVC_EVENTS_STREAM as string;

type Model = "static" | "decentralized";
/** The permission violation the server reports for what `act` does on `nc`, or null within 2 s. */
async function violation(nc: NatsConnection, act: () => void): Promise<PermissionViolationError | null> {
  const seen = (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" && s.error.name === "PermissionViolationError")
        return s.error as PermissionViolationError;
    }
    return null;
  })();
  act();
  await nc.flush().catch(() => undefined);
  return Promise.race([seen, new Promise<null>((r) => setTimeout(() => r(null), 2_000))]);
}

/** An nkey as the registry hands it to a plugin process: its public key and PKCS #8 private key. */
function signingKey(seed: string) {
  const key = nativeFromSeed(seed);
  return { publicKey: key.getPublicKey(), privateKeyPem: key.privateKeyPem() };
}

/** A `.creds` file's user as the registry hands a minted one to a plugin process. */
function jwtUser(creds: string) {
  const { jwt, seed } = parseCreds(creds);
  return { key: signingKey(seed), jwt };
}

describe.each<Model>(["static", "decentralized"])("each service on its own NATS user (%s model)", (model) => {
  const dir = mkdtempSync(join(tmpdir(), `svc-nats-perms-${model}-`));
  const nats = new OwnNatsServer();
  const receiver = new Receiver();
  const signer = fixtureSigner();
  let base = "";
  let operator = "";
  /** The plugin registry's log lines (JSON). */
  const registryLog: string[] = [];
  const credential = (service: string): Record<string, string> =>
    model === "static"
      ? { NATS_NKEY_SEED_FILE: join(dir, `${service}.nk`) }
      : { NATS_CREDS_FILE: join(dir, `${service}.creds`) };

  const secure = model === "decentralized";
  /** TLS options of a test client (the decentralized run's server requires TLS and a client certificate). */
  const tls = () =>
    secure
      ? {
          tls: {
            caFile: join(dir, "ca.pem"),
            certFile: join(dir, "client.pem"),
            keyFile: join(dir, "client.key"),
            servername: "nats.test",
          },
        }
      : {};

  /** How the registry gives plugin processes credentials of their own. */
  const pluginCredentials = (): Record<string, string> =>
    model === "static"
      ? { NATS_PLUGIN_NKEY_SEED_FILE: join(dir, "plugins.nk") }
      : {
          NATS_PLUGIN_SIGNING_KEY_FILE: join(dir, "plugin-signing.nk"),
          NATS_PLUGIN_ACCOUNT: readFileSync(join(dir, "account.pub"), "utf8").trim(),
          // Short, so that the test sees the plugin answer on a renewed user.
          NATS_PLUGIN_CREDENTIAL_TTL_SECONDS: "5",
          // The plugins' own client certificate (never the registry's).
          NATS_PLUGIN_TLS_CERT_FILE: join(dir, "plugin.pem"),
          NATS_PLUGIN_TLS_KEY_FILE: join(dir, "plugin.key"),
        };

  /** A connection as one service's user. */
  const connectAs = (service: string) =>
    connect({
      servers: nats.url,
      reconnect: false,
      ...tls(),
      authenticator:
        model === "static"
          ? nkeyAuthenticator(
              new TextEncoder().encode(readFileSync(join(dir, `${service}.nk`), "utf8").trim()),
            )
          : credsAuthenticator(readFileSync(join(dir, `${service}.creds`))),
    });

  beforeAll(async () => {
    const conf =
      model === "static"
        ? writeNatsAuth(dir, prefix, stream)
        : await writeDecentralizedAuth(dir, prefix, stream);
    // The decentralized run also requires TLS with client certificates (a test CA): authentication, TLS
    // and permissions at once, the production shape.
    let extra = "";
    if (secure) {
      extra = `\n${makeMutualTls(dir)}`;
    }
    await nats.start(readFileSync(conf, "utf8") + extra);
    await receiver.start();
    const common = {
      ...pluginStackEnv(dir, { dev: true, tests: signer }),
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__RateLimitAuthPerMinute: "0",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__JobPollIntervalMs: "100",
      NATS_URL: secure ? `tls://127.0.0.1:${nats.port}` : nats.url,
      ...(secure
        ? {
            NATS_TLS_CA_FILE: join(dir, "ca.pem"),
            NATS_TLS_CERT_FILE: join(dir, "client.pem"),
            NATS_TLS_KEY_FILE: join(dir, "client.key"),
            NATS_TLS_SERVER_NAME: "nats.test",
          }
        : {}),
    };
    const as = (service: string) => ({ ...common, ...credential(service) });
    await h.start(rbacService, as("rbac"));
    await h.start(resolverService, as("resolver"));
    await h.start(
      pluginRegistryService,
      { ...as("plugin-registry"), ...pluginCredentials(), LOG_LEVEL: "info" },
      { logTo: { write: (line: string) => void registryLog.push(line) } },
    );
    await h.start(webhookDispatcherService, as("webhook-dispatcher"));
    await h.start(jobReaperService, as("job-reaper"));
    base = (await h.start(gatewayService, as("gateway"))).hooks.httpAddress as string;
    operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  }, 60_000);

  afterAll(async () => {
    await h.stopAll();
    await receiver.stop();
    await nats.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("runs the main flows: sign-in, every service's routes, a plugin, a webhook delivery", async () => {
    const api = bearerApi(() => base);
    const user = await api("POST", "/api/users", operator, {
      userName: `perm-user-${model}`,
      password: "a long password",
    });
    expect(user.status, user.text).toBe(201);
    const signIn = await api("POST", "/api/auth/login", null, {
      username: `perm-user-${model}`,
      password: "a long password",
    });
    expect(signIn.status, signIn.text).toBe(200);
    const hook = await api("POST", "/api/webhooks", operator, {
      eventName: "workspace.created",
      targetUrl: receiver.url,
      secret: "a-webhook-secret",
    });
    expect(hook.status, hook.text).toBe(201);
    expect(
      (await api("POST", "/api/tenants", operator, { tenantKey: `perm-${model}`, name: "Perm" })).status,
    ).toBe(201);
    expect(
      (
        await api("PUT", `/api/workspaces/perm-ws-${model}`, operator, {
          tenantKey: `perm-${model}`,
          name: "P",
        })
      ).status,
    ).toBe(201);
    expect((await api("GET", "/api/jobs", operator)).status).toBe(200);
    expect((await api("GET", "/api/config/effective", operator)).status).toBe(200);
    await installAndGreet(base, operator);
    if (model === "decentralized") {
      // Past the expiry of a minted user the registry has replaced: the plugin answers on the renewed one.
      const replacedAndExpired = () =>
        registryLog.some((line) => {
          const entry = JSON.parse(line) as { msg?: string; replacedExpiresAt?: string };
          return (
            entry.msg === "renewed a plugin's NATS credentials" &&
            Date.parse(entry.replacedExpiresAt ?? "") < Date.now()
          );
        });
      await until(async () => replacedAndExpired(), 15_000, 100);
      for (let i = 0; i < 5; i++) {
        const again = await api("GET", "/api/plugins/hello/greeting", operator);
        expect(again.status, again.text).toBe(200);
      }
    }
    await receiver.waitFor(1, 15_000);
    expect(JSON.parse(receiver.received[0]?.body ?? "{}")).toMatchObject({ event: "workspace.created" });
    // Uninstalled again (the next model's server starts with an empty store; the database is shared).
    expect((await api("DELETE", "/api/plugins/hello", operator)).status).toBeLessThan(300);
    // Nothing any service did along the way was refused.
    expect(nats.log().filter((line) => /(Publish|Subscription) Violation/.test(line))).toEqual([]);
  }, 60_000);

  it("gives a plugin's user its own subjects and nothing else", async () => {
    const events = ["hello.greeted"];
    const plugin =
      model === "static"
        ? await connect({
            servers: nats.url,
            reconnect: false,
            ...tls(),
            inboxPrefix: SHARED_PLUGIN_INBOX,
            authenticator: nkeyAuthenticator(
              new TextEncoder().encode(readFileSync(join(dir, "plugins.nk"), "utf8").trim()),
            ),
          })
        : await connect({
            servers: nats.url,
            reconnect: false,
            ...tls(),
            inboxPrefix: pluginInboxPrefix("hello"),
            authenticator: credsAuthenticator(
              new TextEncoder().encode(
                (
                  await new PluginCredentials(
                    {
                      subjectPrefix: prefix,
                      natsPluginSigningKeyFile: join(dir, "plugin-signing.nk"),
                      natsPluginAccount: readFileSync(join(dir, "account.pub"), "utf8").trim(),
                      natsPluginNkeySeedFile: null,
                      natsPluginCredentialTtlSeconds: 60,
                      natsPluginTlsCertFile: null,
                      natsPluginTlsKeyFile: null,
                    },
                    {},
                  ).mint("hello", events)
                ).creds,
              ),
            ),
          });
    // Its own route subject, in its queue group: taken.
    expect(
      await violation(plugin, () =>
        plugin.subscribe(`${prefix}.plugins.hello.http`, { queue: "plugin.hello" }),
      ),
    ).toBeNull();
    // The platform's subjects, the other services' replies, a bucket, the stream API: refused.
    for (const subject of [`${prefix}.rbac.>`, `${prefix}.>`, "_INBOX.>", "_INBOX_rbac.>"]) {
      const refused = await violation(plugin, () => plugin.subscribe(subject));
      expect(refused, subject).toMatchObject({ operation: "subscription", subject });
    }
    for (const subject of [
      `$JS.API.STREAM.INFO.KV_${prefix}_revoked_sessions`,
      `$KV.${prefix}_revoked_sessions.someone`,
      `$JS.API.DIRECT.GET.KV_${prefix}_config`,
      `${prefix}.rbac.users.create`,
      `${prefix}.events.user.deleted`,
      `${prefix}.events.hello.not-declared`,
    ]) {
      const refused = await violation(plugin, () => plugin.publish(subject, "{}"));
      expect(refused, subject).toMatchObject({ operation: "publish", subject });
    }
    // A declared event: published to the stream with decentralized auth (a user per plugin knows its
    // events); the one shared user of the static model publishes none (in-process plugins go through the
    // host, which checks the name).
    const declared = await violation(plugin, () => plugin.publish(`${prefix}.events.hello.greeted`, "{}"));
    if (model === "static") expect(declared).toMatchObject({ operation: "publish" });
    else expect(declared).toBeNull();
    await plugin.close();
  });

  it("fails an activation whose plugin user may not take its route, with the plugin's id, and goes on", async () => {
    const lines: Array<{ fields: unknown; message: string }> = [];
    const capture = (fields: unknown, message: string) => lines.push({ fields, message });
    const log = { debug: capture, info: capture, warn: capture, error: capture } as never;
    // The job reaper's user given as the plugins' (a misconfiguration): it may not subscribe plugin subjects.
    const wrong = readFileSync(join(dir, model === "static" ? "job-reaper.nk" : "job-reaper.creds"), "utf8");
    const work = mkdtempSync(join(tmpdir(), "svc-plugin-user-"));
    mkdirSync(join(work, "plugin"));
    writeFileSync(join(work, "plugin", "index.mjs"), "export class Plugin { greet() { return {}; } }\n");
    const pool = new WorkerPool({
      memoryLimitMb: 64,
      natsServers: [nats.url],
      slotsDir: join(work, "slots"),
      spares: 0,
      natsAuth: {
        kind: "shared",
        auth: {
          ...(model === "static" ? { key: signingKey(wrong.trim()) } : jwtUser(wrong)),
          ...(secure
            ? {
                tls: {
                  ca: readFileSync(join(dir, "ca.pem"), "utf8"),
                  cert: readFileSync(join(dir, "plugin.pem"), "utf8"),
                  key: readFileSync(join(dir, "plugin.key"), "utf8"),
                  servername: "nats.test",
                },
              }
            : {}),
        },
        inboxPrefix: SHARED_PLUGIN_INBOX,
      },
    });
    const host = startPluginHost(pool, "misconfigured", work, {
      serve: { subject: `${prefix}.plugins.misconfigured.http`, queue: "plugin.misconfigured" },
      log,
    });
    await expect(host.ready).rejects.toThrow(/NATS refused the plugin's subscription/);
    expect(lines).toContainEqual(
      expect.objectContaining({
        fields: expect.objectContaining({ pluginId: "misconfigured" }),
        message: expect.stringMatching(/NATS refused a subscription/),
      }),
    );
    await pool.close();
    rmSync(work, { recursive: true, force: true });
    // The platform goes on.
    expect((await bearerApi(() => base)("GET", "/api/jobs", operator)).status).toBe(200);
  });

  it("issues, lists and revokes an external backend's credentials, which reach only its subjects", async () => {
    const api = bearerApi(() => base);
    const id = `outside-${model.slice(0, 3)}`;
    const bytes = await codePlugin(
      dir,
      signer,
      id,
      "// served elsewhere\n",
      [{ method: "GET", path: "/ping", handler: "ping" }],
      { runtime: "external", events: [`${id}.happened`] },
    );
    expect((await installPackage(base, operator, bytes)).status).toBe(201);
    expect((await api("POST", `/api/plugins/${id}/activate`, operator)).status).toBe(200);
    const issued = await api("POST", `/api/plugins/${id}/credentials`, operator, { name: "ci backend" });
    if (model === "static") {
      // One shared plugins user: nothing to mint from.
      expect(issued.status, issued.text).toBe(409);
      expect(issued.json()).toMatchObject({ detail: expect.stringMatching(/NATS_PLUGIN_SIGNING_KEY_FILE/) });
      expect((await api("DELETE", `/api/plugins/${id}`, operator)).status).toBe(204);
      return;
    }
    expect(issued.status, issued.text).toBe(201);
    const credential = issued.json<{
      credentialId: string;
      creds: string;
      publicKey: string;
      subjects: { serve: string; queue: string; inboxPrefix: string; publish: string[] };
    }>();
    expect(credential.subjects).toEqual({
      serve: `${prefix}.plugins.${id}.http`,
      queue: `plugin.${id}`,
      inboxPrefix: `_INBOX_plugin_${id}`,
      publish: [`${prefix}.events.${id}.happened`],
    });
    // The backend connects with it, serves its route and publishes its event.
    const backend = await connect({
      servers: nats.url,
      reconnect: false,
      ...tls(),
      inboxPrefix: credential.subjects.inboxPrefix,
      authenticator: credsAuthenticator(new TextEncoder().encode(credential.creds)),
    });
    backend.subscribe(credential.subjects.serve, {
      queue: credential.subjects.queue,
      callback: (_err, msg) => {
        msg.respond(JSON.stringify({ status: 200, body: { pong: true } }));
      },
    });
    await backend.flush();
    const pinged = await eventually(
      () => api("GET", `/api/plugins/${id}/ping`, operator),
      (r) => r.status === 200,
    );
    expect(pinged.json()).toEqual({ pong: true });
    const ack = await jetstream(backend).publish(`${prefix}.events.${id}.happened`, "{}");
    expect(ack.stream).toBe(stream);
    for (const subject of [`${prefix}.events.user.deleted`, `${prefix}.resolver.tenants.create`]) {
      const refused = await violation(backend, () => backend.publish(subject, "{}"));
      expect(refused, subject).toMatchObject({ operation: "publish", subject });
    }
    expect(await violation(backend, () => backend.subscribe(`${prefix}.rbac.>`))).toMatchObject({
      operation: "subscription",
    });
    await backend.close();

    // An independent client: the same credential read and used by Python speaking the NATS protocol
    // itself (another language's nkey signature, TLS with a client certificate).
    const credsFile = join(dir, `${id}.creds`);
    writeFileSync(credsFile, credential.creds, { mode: 0o600 });
    const python = spawn(
      "python3",
      [
        join(import.meta.dirname, "clients", "nats_plugin_backend.py"),
        `127.0.0.1:${nats.port}`,
        credsFile,
        credential.subjects.serve,
        credential.subjects.queue,
        credential.subjects.inboxPrefix,
        credential.subjects.publish[0] as string,
        prefix,
        join(dir, "ca.pem"),
        join(dir, "plugin.pem"),
        join(dir, "plugin.key"),
        "nats.test",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let said = "";
    python.stdout.on("data", (chunk: Buffer) => (said += chunk.toString()));
    python.stderr.on("data", (chunk: Buffer) => (said += chunk.toString()));
    try {
      await until(async () => said.includes("ready") || python.exitCode !== null, 10_000);
      expect(said).toContain("ready");
      const fromPython = await eventually(
        () => api("GET", `/api/plugins/${id}/ping`, operator),
        (r) => r.status === 200 && r.text.includes("python"),
      );
      expect(fromPython.json()).toEqual({ pong: true, lang: "python", stream });
      await until(async () => said.includes("refused"), 5_000);
      expect(said).toContain(`Permissions Violation for Subscription to "${prefix}.rbac.>"`);
    } finally {
      python.kill();
    }

    // Listed without its secret; revoked; both audited. Platform operators only.
    const listed = await api("GET", `/api/plugins/${id}/credentials`, operator);
    expect(listed.json()).toEqual([
      expect.objectContaining({
        credentialId: credential.credentialId,
        name: "ci backend",
        revokedAtUtc: null,
      }),
    ]);
    expect(listed.text).not.toContain(credential.creds.slice(0, 40));
    const workspaceAdmin = await mintToken({
      scope: "workspace",
      workspaceKey: `perm-ws-${model}`,
      permissions: ["plugin.execute", "plugin.read"],
    });
    expect((await api("POST", `/api/plugins/${id}/credentials`, workspaceAdmin, {})).status).toBe(403);
    const revoked = await api(
      "DELETE",
      `/api/plugins/${id}/credentials/${credential.credentialId}`,
      operator,
    );
    expect(revoked.status, revoked.text).toBe(204);
    expect((await api("GET", `/api/plugins/${id}/credentials`, operator)).json()).toEqual([
      expect.objectContaining({ revokedAtUtc: expect.any(String) }),
    ]);
    const audit = (await api("GET", "/api/plugins/audit?limit=50", operator)).text;
    expect(audit).toContain(`credentials issue ${credential.credentialId}`);
    expect(audit).toContain(`credentials revoke ${credential.credentialId}`);
    // None for a plugin not installed, nor for one that runs in the platform's runtime (it gets its users
    // at activation).
    expect((await api("POST", `/api/plugins/nonexistent/credentials`, operator, {})).status).toBe(404);
    const inProcess = await codePlugin(
      dir,
      signer,
      `inside-${model.slice(0, 3)}`,
      "export class Plugin {}\n",
      [],
    );
    expect((await installPackage(base, operator, inProcess)).status).toBe(201);
    const refused = await api("POST", `/api/plugins/inside-${model.slice(0, 3)}/credentials`, operator, {});
    expect(refused.status, refused.text).toBe(409);
    expect((await api("DELETE", `/api/plugins/inside-${model.slice(0, 3)}`, operator)).status).toBe(204);
    expect((await api("DELETE", `/api/plugins/${id}`, operator)).status).toBe(204);
  });

  it("refuses a client without credentials", async () => {
    const refused = await connect({ servers: nats.url, reconnect: false, ...tls() }).then(
      async (nc) => {
        await nc.close();
        return false;
      },
      (error: unknown) => isNatsAuthError(error),
    );
    expect(refused).toBe(true);
    if (secure) {
      // Nor one without TLS, even holding a service's credentials.
      const plain = await connect({
        servers: nats.url,
        reconnect: false,
        authenticator: credsAuthenticator(readFileSync(join(dir, "gateway.creds"))),
      }).then(
        async (nc) => {
          await nc.close();
          return "connected";
        },
        (error: unknown) => String(error),
      );
      expect(plain).not.toBe("connected");
    }
  });

  it("refuses a service's user a subject outside its list", async () => {
    const gateway = await connectAs("gateway");
    const jwks = await violation(gateway, () => gateway.subscribe(`${prefix}.rbac.keys.jwks`));
    expect(jwks).toMatchObject({ operation: "subscription", subject: `${prefix}.rbac.keys.jwks` });

    // Nor may it read other services' replies (a sign-in's answer holds a token) or the sign-in requests.
    for (const subject of ["_INBOX.>", "_INBOX_rbac.>", `${prefix}.rbac.auth.login`]) {
      const refused = await violation(gateway, () => gateway.subscribe(subject));
      expect(refused, subject).toMatchObject({ operation: "subscription", subject });
    }
    await gateway.close();

    const dispatcher = await connectAs("webhook-dispatcher");
    for (const subject of [
      `${prefix}.rbac.roles.changed`,
      `$KV.${prefix}_revoked_sessions.someone`,
      `$JS.API.STREAM.PURGE.KV_${prefix}_revoked_sessions`,
      `${prefix}.rbac.users.create`,
      // Publishing a key of its own to sign principals with (only the gateway's user may).
      `$KV.${prefix}_principal_keys.forged`,
    ]) {
      const refused = await violation(dispatcher, () => dispatcher.publish(subject, "{}"));
      expect(refused, subject).toMatchObject({ operation: "publish", subject });
    }
    await dispatcher.close();
    // The server logs each refusal (where an operator sees an attempt).
    expect(
      nats.log().filter((line) => /(Publish|Subscription) Violation/.test(line)).length,
    ).toBeGreaterThanOrEqual(5);
  });
});
