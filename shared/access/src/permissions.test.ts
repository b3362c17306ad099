import type { Principal } from "@svc/bus";
import { describe, expect, it } from "vitest";

import { filterWorkspaceKeys, hasPermission } from "./permissions.js";

const principal = (over: Partial<Principal>): Principal => ({
  subject: "u",
  scope: "platform",
  workspaceKey: null,
  permissions: [],
  roles: [],
  ...over,
});

describe("hasPermission", () => {
  it("lets superadmin pass everything", () => {
    expect(hasPermission(principal({ roles: ["superadmin"] }), "tenant.delete")).toBe(true);
  });
  it("needs the exact key or *", () => {
    expect(hasPermission(principal({ permissions: ["tenant.read"] }), "tenant.read")).toBe(true);
    expect(hasPermission(principal({ permissions: ["tenant.read"] }), "tenant.delete")).toBe(false);
    expect(hasPermission(principal({ permissions: ["*"] }), "tenant.delete")).toBe(true);
    expect(hasPermission(principal({ permissions: ["tenant.*"] }), "tenant.read")).toBe(false);
  });
  it("gives host.api no authority by itself", () => {
    expect(hasPermission(principal({ roles: ["host.api"] }), "tenant.read")).toBe(false);
  });
});

describe("filterWorkspaceKeys", () => {
  it("keeps what a workspace admin could hold and drops platform keys and *", () => {
    expect(
      filterWorkspaceKeys(
        ["membership.read", "tenant.create", "user.update", "*", "user.read", "webhook.manage"],
        new Set(),
      ),
    ).toEqual(["membership.read", "user.read", "webhook.manage"]);
  });
  it("keeps plugin keys only for plugins active in the workspace", () => {
    expect(filterWorkspaceKeys(["telephony.call.read", "crm.deal.read"], new Set(["telephony"]))).toEqual([
      "telephony.call.read",
    ]);
  });
});
