/** Which flows may publish a plugin's event (the plugin's chain), and never a core one. */
import type { PluginContribution } from "@svc/contracts";
import { describe, expect, it } from "vitest";

import { mayPublish } from "./flows.js";
import { PluginEventScopes } from "./plugin-contributions.js";

const hello = {
  pluginId: "hello",
  events: ["hello.greeted"],
  workspaces: ["ws-a"],
} as unknown as PluginContribution;

describe("the events a flow may publish", () => {
  const scopes = new PluginEventScopes();
  scopes.apply([hello]);
  const may = (name: string, workspace: string | null) =>
    mayPublish(name, (n) => scopes.mayRaise(n, workspace));

  it("its own flow.* names anywhere; a plugin's events only where the plugin is in the chain", () => {
    expect(may("flow.welcomed", "ws-b")).toBe(true);
    expect(may("hello.greeted", "ws-a")).toBe(true);
    expect(may("hello.greeted", "ws-b")).toBe(false);
    // A platform flow: wherever the plugin is installed.
    expect(may("hello.greeted", null)).toBe(true);
  });

  it("never a core event, an unknown name or the bare prefix", () => {
    for (const name of ["user.deleted", "plugin.refused", "workspace.created", "flow.", "other.event"]) {
      expect(may(name, "ws-a"), name).toBe(false);
      expect(may(name, null), name).toBe(false);
    }
  });

  it("follows the chains: out of ws-a's chain, no longer from ws-a", () => {
    const later = new PluginEventScopes();
    later.apply([hello]);
    later.apply([{ ...hello, workspaces: [] }]);
    expect(later.mayRaise("hello.greeted", "ws-a")).toBe(false);
  });
});
