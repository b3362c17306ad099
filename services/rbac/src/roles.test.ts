/**
 * Roles through their contracts, without NATS or PostgreSQL: the platform-only rule is the contract's,
 * checked once before any handler runs (no handler repeats it), and the rules on system roles refuse a
 * change before the database is asked.
 */
import type { Principal } from "@svc/bus";
import { callRoute, rbacContract, rbacRoutes, type RouteContract } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import type { RbacDeps } from "./deps.js";
import { putRole } from "./roles.js";

/** Dependencies none of these calls may touch: the rules answer first. */
const untouched = new Proxy({} as RbacDeps, {
  get(_target, name) {
    throw new Error(`the handler used deps.${String(name)} before its rules answered`);
  },
});

const platform: Principal = {
  subject: "op",
  scope: "platform",
  workspaceKey: null,
  permissions: ["role.read", "role.update", "user.create"],
  roles: ["operator"],
};
/** A workspace session holding every key of the routes below: the scope, not the key, refuses it. */
const workspaceAdmin: Principal = { ...platform, scope: "workspace", workspaceKey: "alpha" };

const neverCalled = () => {
  throw new Error("the handler ran");
};
const userId = "6f1c1b8e-0d9b-4f5e-9a57-5d3b1b0c2a11";

describe("platform-only routes", () => {
  const cases = [
    ["roles.list", {}, null],
    ["permissions.list", {}, null],
    ["roles.put", { role: "editor" }, { permissions: ["user.read"] }],
    ["roles.delete", { role: "editor" }, null],
    ["role-assignments.put", { userId }, { role: "editor" }],
    ["role-assignments.delete", { userId }, null],
    ["users.create", {}, { userName: "newbie", password: "a long enough password" }],
  ] as const;

  it.each(cases)(
    "%s refuses a workspace session holding its key, before the handler",
    async (name, params, body) => {
      const route: RouteContract = rbacRoutes[name];
      expect(route.platformOnly).toBe(true);
      const call = callRoute(route, neverCalled, { principal: workspaceAdmin, params, query: {}, body });
      await expect(call).rejects.toMatchObject({
        code: ErrorCode.Forbidden,
        extensions: { requiredScope: "platform" },
      });
    },
  );

  it("covers every platform-only route rbac serves", () => {
    const routes: Record<string, RouteContract> = rbacContract.routes;
    const platformOnly = Object.entries(routes)
      .filter(([, route]) => route.platformOnly === true)
      .map(([name]) => name);
    for (const [name] of cases) expect(platformOnly).toContain(name);
  });
});

describe("PUT /api/rbac/roles/:role on system roles", () => {
  const put = (role: string, body: { permissions: string[]; scope?: "platform" | "workspace" }) =>
    callRoute(rbacRoutes["roles.put"], (req) => putRole(untouched, req), {
      principal: platform,
      params: { role },
      query: {},
      body,
    });

  it("changes nothing of superadmin", async () => {
    await expect(put("superadmin", { permissions: ["*"] })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
    });
  });

  it("keeps admin's grants fixed, naming the rule and the grants", async () => {
    await expect(put("admin", { permissions: ["user.read", "user.create"] })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
      extensions: { rule: "system-role-grants", role: "admin" },
    });
  });

  it("keeps a system role's scope", async () => {
    await expect(put("host.api", { permissions: ["user.read"], scope: "workspace" })).rejects.toMatchObject({
      code: ErrorCode.Conflict,
      extensions: { rule: "system-role-scope", role: "host.api" },
    });
  });
});
