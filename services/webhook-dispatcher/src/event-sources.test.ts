/** Which events belong to who published them (Svc-Event-Source), judged without NATS or PostgreSQL. */
import type { PluginContribution } from "@svc/contracts";
import { EventSource } from "@svc/wire-contract";
import { describe, expect, it } from "vitest";

import { EventSources } from "./event-sources.js";
import { PluginEventScopes } from "./plugin-contributions.js";

const hello = {
  pluginId: "hello",
  events: ["hello.greeted"],
  workspaces: ["ws-a"],
} as unknown as PluginContribution;

function sources(plugins: readonly PluginContribution[] = [hello], at = 1_000) {
  const scopes = new PluginEventScopes();
  scopes.apply(plugins, at);
  return new EventSources(new Set(["user.created", "plugin.refused", "flow.notification"]), scopes);
}

describe("an event's source", () => {
  const s = sources();
  const ok = (name: string, source: string | null, ws: string | null) => s.judge(name, source, ws).ok;

  it("the platform: only the catalogue's built-in events", () => {
    expect(ok("user.created", EventSource.Platform, null)).toBe(true);
    expect(ok("hello.greeted", EventSource.Platform, null)).toBe(false);
    expect(ok("flow.other", EventSource.Platform, null)).toBe(false);
  });

  it("a plugin: its declared events, platform-wide or where its chain holds it; with or without the header", () => {
    for (const source of [EventSource.plugin("hello"), null]) {
      expect(ok("hello.greeted", source, "ws-a")).toBe(true);
      expect(ok("hello.greeted", source, null)).toBe(true);
      expect(ok("hello.greeted", source, "ws-b")).toBe(false);
      expect(ok("hello.other", source, "ws-a")).toBe(false);
      expect(ok("user.created", source, null)).toBe(false);
    }
    expect(ok("hello.greeted", EventSource.plugin("other"), null)).toBe(false);
    // No namespace: no plugin it could belong to.
    expect(ok("hello", null, null)).toBe(false);
  });

  it("a flow: flow.<name> anywhere, a plugin's events where its workspace may raise them, no core event", () => {
    const flow = EventSource.flow("f-1");
    expect(ok("flow.relayed", flow, "ws-b")).toBe(true);
    expect(ok("hello.greeted", flow, "ws-a")).toBe(true);
    expect(ok("hello.greeted", flow, "ws-b")).toBe(false);
    expect(ok("user.created", flow, null)).toBe(false);
    expect(ok("plugin.refused", flow, null)).toBe(false);
    // The bare prefix names no flow event.
    expect(ok("flow.", flow, null)).toBe(false);
  });

  it("an unknown source is refused and no newer view of the plugins would change that", () => {
    expect(s.judge("user.created", "rbac", null)).toMatchObject({ ok: false, mayBeStale: false });
    expect(s.judge("user.created", "", null)).toMatchObject({ ok: false, mayBeStale: false });
  });

  it("a refused plugin event may be admitted by a newer view: asked for when the view is older than the event", () => {
    expect(s.judge("hello.greeted", null, "ws-b")).toMatchObject({ ok: false, mayBeStale: true });
    // The view was asked for at 1 000 ms; an event published at 100 000 ms is newer (a refresh is due),
    // one published long before it is not (clocks may differ by up to five seconds).
    expect(s.olderThan(100_000)).toBe(true);
    expect(s.olderThan(-10_000)).toBe(false);
    const fresher = sources([{ ...hello, workspaces: ["ws-a", "ws-b"] }], 200_000);
    expect(fresher.judge("hello.greeted", null, "ws-b").ok).toBe(true);
    expect(fresher.olderThan(100_000)).toBe(false);
  });
});
