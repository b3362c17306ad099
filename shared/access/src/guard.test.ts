import type { Principal } from "@svc/bus";
import { describe, expect, it } from "vitest";

import { authorise } from "./guard.js";

const p = (over: Partial<Principal>): Principal => ({
  subject: "s",
  scope: "platform",
  workspaceKey: null,
  permissions: [],
  roles: [],
  ...over,
});
const members = { permission: ["membership.read", "workspace.read"] as const };

describe("authorise", () => {
  it("403 names the missing key", () => {
    expect(() => authorise(p({}), { permission: "tenant.read" }, {}, {})).toThrow(
      expect.objectContaining({ status: 403, extensions: { missingPermission: "tenant.read" } }),
    );
  });
  it("accepts either key of a doubly-listed route, and names both when both are missing", () => {
    expect(() =>
      authorise(p({ permissions: ["workspace.read"] }), members, { workspaceKey: "a" }, {}),
    ).not.toThrow();
    expect(() => authorise(p({}), members, { workspaceKey: "a" }, {})).toThrow(
      expect.objectContaining({
        extensions: { missingPermission: "membership.read", anyOf: ["membership.read", "workspace.read"] },
      }),
    );
  });
  it("superadmin passes; host.api without grants does not", () => {
    expect(() =>
      authorise(p({ roles: ["superadmin"] }), { permission: "tenant.delete" }, {}, {}),
    ).not.toThrow();
    expect(() => authorise(p({ roles: ["host.api"] }), { permission: "tenant.read" }, {}, {})).toThrow(
      expect.objectContaining({ status: 403 }),
    );
  });
  it("platform-only routes refuse workspace sessions holding the key", () => {
    const ws = p({ scope: "workspace", workspaceKey: "a", permissions: ["user.create"] });
    expect(() => authorise(ws, { permission: "user.create", platformOnly: true }, {}, {})).toThrow(
      expect.objectContaining({ status: 403 }),
    );
  });
  it("another workspace is a 404 for workspace sessions; a session without scope gets 403 anywhere", () => {
    const ws = p({ scope: "workspace", workspaceKey: "a", permissions: ["plugin.assign"] });
    expect(() => authorise(ws, { permission: "plugin.assign" }, { workspaceKey: "a" }, {})).not.toThrow();
    expect(() => authorise(ws, { permission: "plugin.assign" }, { workspaceKey: "b" }, {})).toThrow(
      expect.objectContaining({ status: 404 }),
    );
    expect(() => authorise(ws, { permission: "plugin.assign" }, {}, { workspaceKey: "b" })).toThrow(
      expect.objectContaining({ status: 404 }),
    );
    const none = p({ scope: null, permissions: ["plugin.assign"] });
    expect(() => authorise(none, { permission: "plugin.assign" }, { workspaceKey: "a" }, {})).toThrow(
      expect.objectContaining({ status: 403 }),
    );
    expect(() => authorise(none, { permission: "plugin.assign" }, {}, {})).toThrow(
      expect.objectContaining({ status: 403 }),
    );
  });
  it("checks the path and every query value, arrays included", () => {
    const ws = p({ scope: "workspace", workspaceKey: "a", permissions: ["plugin.assign"] });
    expect(() =>
      authorise(ws, { permission: "plugin.assign" }, { workspaceKey: "a" }, { workspaceKey: "b" }),
    ).toThrow(expect.objectContaining({ status: 404 }));
    expect(() => authorise(ws, { permission: "plugin.assign" }, {}, { workspaceKey: ["a", "b"] })).toThrow(
      expect.objectContaining({ status: 404 }),
    );
    expect(() =>
      authorise(ws, { permission: "plugin.assign" }, {}, { workspaceKey: ["a", "a"] }),
    ).not.toThrow();
  });

  it("a blank workspaceKey query means default", () => {
    const ws = p({ scope: "workspace", workspaceKey: "default", permissions: ["webhook.read"] });
    expect(() => authorise(ws, { permission: "webhook.read" }, {}, { workspaceKey: " " })).not.toThrow();
  });
});
