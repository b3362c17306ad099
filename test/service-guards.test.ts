/**
 * Issue 34, item 14: each service enforces its own contract. rbac's handlers trusted the gateway to have
 * checked the permission key and the platform scope (`createUser` checked nothing), so any request that
 * reached a service's subject without passing the gateway (another service, a tool on the bus) was obeyed.
 * `serveRoute` now runs the gateway's guard again in the owning service, with the principal the request
 * carries.
 */
import type { Principal } from "@svc/bus";
import { rbacRoutes, requestRoute, resolverRoutes } from "@svc/contracts";
import { SvcError } from "@svc/errors";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";

const h = await createHarness();
let bus: Awaited<ReturnType<typeof h.start>>["deps"]["bus"];

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

afterAll(() => h.stopAll());
beforeAll(async () => {
  bus = (await h.start(rbacService)).deps.bus;
  await h.start(resolverService);
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
