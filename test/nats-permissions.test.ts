/**
 * Issue 23, item 2: least privilege per service. `make nats-auth` writes one user per service with the
 * permissions the code declares (shared/runtime/src/nats-permissions.ts), in both models: an nkey user per
 * service in an `authorization` block, and operator mode (an account with a signing key, a user JWT and a
 * `.creds` file per service). A nats-server of the test's own runs with each configuration in turn and each
 * service connects as its own user. The main flows pass
 * (sign-in, operator routes of every service, a plugin installed, activated and answering, an event
 * delivered to a webhook receiver); a client with no credentials is refused, and a service's user trying
 * a subject outside its list is refused by the server: the gateway answering rbac's JWKS subject, the
 * dispatcher forging a broadcast, writing the revocation bucket or purging it.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import {
  connect,
  credsAuthenticator,
  type NatsConnection,
  nkeyAuthenticator,
  type PermissionViolationError,
} from "@nats-io/transport-node";
import { isNatsAuthError } from "@svc/bus";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { writeDecentralizedAuth, writeNatsAuth } from "../scripts/nats-auth.js";
import { fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { installAndGreet } from "./support/example-plugin-flow.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http } from "./support/http.js";
import { OwnNatsServer } from "./support/nats-server.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";

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

describe.each<Model>(["static", "decentralized"])("each service on its own NATS user (%s model)", (model) => {
  const dir = mkdtempSync(join(tmpdir(), `svc-nats-perms-${model}-`));
  const nats = new OwnNatsServer();
  const receiver = new Receiver();
  let base = "";
  let operator = "";
  const credential = (service: string): Record<string, string> =>
    model === "static"
      ? { NATS_NKEY_SEED_FILE: join(dir, `${service}.nk`) }
      : { NATS_CREDS_FILE: join(dir, `${service}.creds`) };

  /** A connection as one service's user. */
  const connectAs = (service: string) =>
    connect({
      servers: nats.url,
      reconnect: false,
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
    await nats.start(readFileSync(conf, "utf8"));
    await receiver.start();
    const common = {
      ...pluginStackEnv(dir, { dev: true, tests: fixtureSigner() }),
      BackendHost__RateLimitApiPerMinute: "0",
      BackendHost__RateLimitAuthPerMinute: "0",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__JobPollIntervalMs: "100",
      NATS_URL: nats.url,
    };
    const as = (service: string) => ({ ...common, ...credential(service) });
    await h.start(rbacService, as("rbac"));
    await h.start(resolverService, as("resolver"));
    await h.start(pluginRegistryService, as("plugin-registry"));
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
    const signIn = await http(`${base}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: `perm-user-${model}`, password: "a long password" }),
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
    await receiver.waitFor(1, 15_000);
    expect(JSON.parse(receiver.received[0]?.body ?? "{}")).toMatchObject({ event: "workspace.created" });
    // Uninstalled again (the next model's server starts with an empty store; the database is shared).
    expect((await api("DELETE", "/api/plugins/hello", operator)).status).toBeLessThan(300);
    // Nothing any service did along the way was refused.
    expect(nats.log().filter((line) => /(Publish|Subscription) Violation/.test(line))).toEqual([]);
  }, 60_000);

  it("refuses a client without credentials", async () => {
    const refused = await connect({ servers: nats.url, reconnect: false }).then(
      async (nc) => {
        await nc.close();
        return false;
      },
      (error: unknown) => isNatsAuthError(error),
    );
    expect(refused).toBe(true);
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
