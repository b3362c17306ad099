/**
 * Each service enforces its own contract. rbac's handlers trusted the gateway to have
 * checked the permission key and the platform scope (`createUser` checked nothing), so any request that
 * reached a service's subject without passing the gateway (another service, a tool on the bus) was obeyed.
 * `serveRoute` now runs the gateway's guard again in the owning service, with the principal the request
 * carries.
 *
 * And that principal is believed only as the gateway signed it. The guard tests send as
 * a gateway would (a signer whose key is published in the principal keys bucket); the probe sends as
 * anyone else on the bus: a superadmin principal written by hand, a signed low-privilege principal with a
 * superadmin body, an assertion signed by a key of its own, a known key id published again with its own
 * key. Each is refused (401) and nothing is done.
 */
import { generateKeyPairSync } from "node:crypto";

import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Bus, Header, type Principal } from "@svc/bus";
import { rbacRoutes, requestRoute, resolverRoutes } from "@svc/contracts";
import { SvcError } from "@svc/errors";
import { createLogger } from "@svc/observability";
import { GatewayPrincipalSigner, principalKeysBucket } from "@svc/runtime";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";

const h = await createHarness();
let bus: Bus;

const principal = (over: Partial<Principal>): Principal => ({
  subject: "probe",
  scope: "platform",
  workspaceKey: null,
  permissions: [],
  roles: [],
  ...over,
});

/** The problem a refused request answers with (the bus carries the code and the detail). */
async function refusal(promise: Promise<unknown>): Promise<{ status: number; detail: string }> {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof SvcError)) throw error;
    return { status: error.status, detail: error.message };
  }
  throw new Error("the request was obeyed");
}

let testClient: NatsConnection | undefined;
afterAll(async () => {
  await h.stopAll();
  await testClient?.close();
});
beforeAll(async () => {
  await h.start(rbacService);
  await h.start(resolverService);
  // This test sends as the gateway does: principals signed with a key it published (on a connection of
  // its own: the services' users may not write the gateway's keys).
  testClient = await connect(h.natsOptions());
  const prefix = h.env.SVC_SUBJECT_PREFIX as string;
  const signer = new GatewayPrincipalSigner(testClient, prefix, 1);
  await signer.publish();
  bus = new Bus({
    nc: testClient,
    prefix,
    service: "gateway",
    logger: createLogger("t", "silent"),
    defaultTimeoutMs: 5_000,
    principalSigner: signer,
  });
});

describe("services check the route's guard themselves", () => {
  it("rbac refuses to create a user for a caller without user.create, or without platform scope", async () => {
    const create = (p: Principal, userName: string) =>
      requestRoute(bus, rbacRoutes["users.create"], {
        principal: p,
        params: {},
        query: {},
        body: { userName, password: "a-long-enough-password" },
      });
    expect(await refusal(create(principal({}), "nobody-said-so"))).toMatchObject({ status: 403 });
    const workspaceAdmin = principal({ scope: "workspace", workspaceKey: "a", permissions: ["user.create"] });
    expect((await refusal(create(workspaceAdmin, "not-platform"))).detail).toMatch(/platform sessions/);
    const rows = await h.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM rbac.users WHERE user_name IN ('nobody-said-so', 'not-platform')`,
    );
    expect(rows[0]?.n).toBe(0);
    const allowed = await create(principal({ permissions: ["user.create"] }), "said-so");
    expect(allowed.status).toBe(201);
  });

  it("rbac refuses a role grant and the resolver a tenant delete without the key", async () => {
    const grant = requestRoute(bus, rbacRoutes["role-assignments.put"], {
      principal: principal({ permissions: ["user.read"] }),
      params: { userId: "00000000-0000-4000-8000-000000000000" },
      query: {},
      body: { role: "superadmin" },
    });
    expect(await refusal(grant)).toMatchObject({ status: 403 });
    const drop = requestRoute(bus, resolverRoutes["tenants.delete"], {
      principal: principal({ permissions: ["tenant.read"] }),
      params: { tenantKey: "default" },
      query: {},
      body: null,
    });
    expect((await refusal(drop)).detail).toMatch(/tenant\.delete/);
  });

  it("a workspace session naming another workspace is refused by the owning service", async () => {
    const members = requestRoute(bus, rbacRoutes["members.list"], {
      principal: principal({ scope: "workspace", workspaceKey: "a", permissions: ["membership.read"] }),
      params: { workspaceKey: "b" },
      query: {},
      body: null,
    });
    expect(await refusal(members)).toMatchObject({ status: 404 });
  });
});

describe("a principal is believed only as the gateway signed it", () => {
  const superadmin = principal({ subject: "intruder", permissions: ["*"], roles: ["superadmin"] });
  const createUser = (userName: string) => ({
    principal: superadmin,
    params: {},
    query: {},
    body: { userName, password: "a-long-enough-password" },
  });
  const created = async (userName: string) =>
    (
      await h.sql<{ n: number }>(`SELECT count(*)::int AS n FROM rbac.users WHERE user_name = $1`, [userName])
    )[0]?.n;
  /** A request sent as anyone on the bus: the principal in the body, the headers as given. */
  const raw = (userName: string, headers: Record<string, string> = {}) =>
    bus.request(rbacRoutes["users.create"].subject, createUser(userName), { headers });

  it("refuses a principal written into the request without the gateway's signature", async () => {
    expect(await refusal(raw("forged-unsigned"))).toMatchObject({ status: 401 });
    expect(await created("forged-unsigned")).toBe(0);
  });

  it("refuses a signed principal whose body was rewritten", async () => {
    const signed = await bus.principalSigner?.sign(principal({ subject: "nobody", permissions: [] }));
    const refused = await refusal(raw("forged-rewritten", { [Header.Principal]: signed as string }));
    expect(refused).toMatchObject({ status: 401 });
    expect(refused.detail).toMatch(/not the one the gateway signed/);
    expect(await created("forged-rewritten")).toBe(0);
  });

  it("refuses an assertion signed by a key no gateway published, or a known key id published again", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const own = (kid: string) =>
      new SignJWT({ principal: superadmin })
        .setProtectedHeader({ alg: "EdDSA", kid })
        .setIssuer("svc-gateway")
        .setIssuedAt()
        .setExpirationTime("2m")
        .sign(privateKey);
    expect(await refusal(raw("forged-own-key", { [Header.Principal]: await own("made-up") }))).toMatchObject({
      status: 401,
    });
    // On an open bus anyone can write the bucket: a new key id would be taken (the NATS permissions keep it
    // to the gateway's user: test/nats-permissions.test.ts), but a known one is pinned to its first key.
    const kv = await new Kvm(testClient as NatsConnection).open(principalKeysBucket(bus.prefix));
    const known = (await kv.keys().then(async (it) => {
      for await (const k of it) return k;
      return undefined;
    })) as string;
    await kv.put(known, JSON.stringify({ ...publicKey.export({ format: "jwk" }), kid: known, alg: "EdDSA" }));
    await new Promise((r) => setTimeout(r, 200));
    expect(await refusal(raw("forged-pinned", { [Header.Principal]: await own(known) }))).toMatchObject({
      status: 401,
    });
    expect(await created("forged-own-key")).toBe(0);
    expect(await created("forged-pinned")).toBe(0);
  });
});
