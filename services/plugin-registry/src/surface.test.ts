/**
 * Why a surface is not rendered, as the gateway is told (it logs every reason but an empty chain): the
 * chain read from a stand-in for the database, the runtime's loaded packages in memory.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { PublicWorkspace } from "@svc/contracts";
import type { Db } from "@svc/db";
import type { Logger } from "@svc/observability";
import { afterAll, describe, expect, it } from "vitest";

import type { SurfaceRenderer } from "./runtime/renderer.js";
import type { PluginRuntime } from "./runtime/runtime.js";
import { renderSurface } from "./surface.js";
import type { ThemeTables } from "./themes.js";

const dir = mkdtempSync(join(tmpdir(), "svc-surface-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A plugin loaded on this replica: with or without views/surface/index.njk. */
function loaded(pluginId: string, withEntry: boolean) {
  const root = join(dir, pluginId);
  mkdirSync(join(root, "views", "surface"), { recursive: true });
  if (withEntry) writeFileSync(join(root, "views", "surface", "index.njk"), "<p>{{ workspace.key }}</p>");
  return { root, sha256: pluginId.padEnd(64, "0") };
}

function deps(chain: string[], packages: Record<string, { root: string; sha256: string }>) {
  return {
    db: { any: async () => chain.map((plugin_id) => ({ plugin_id })) } as unknown as Db,
    themes: {} as ThemeTables,
    runtime: { packageOf: (id: string) => packages[id] } as unknown as PluginRuntime,
    renderer: {} as SurfaceRenderer,
    log: {} as Logger,
  };
}

const request = {
  workspace: { workspace: { key: "ws-a" } } as unknown as PublicWorkspace,
  publicBaseUrl: "https://a.example",
  path: "/",
  data: { navigation: [], snippets: {} },
};

describe("renderSurface's reasons for the shell", () => {
  it("no-chain: the workspace's chain holds no active, entitled plugin", async () => {
    expect(await renderSurface(deps([], {}), request)).toEqual({ html: null, reason: "no-chain" });
  });

  it("not-loaded: the primary is active but this replica holds no copy of it", async () => {
    const later = loaded("later", true);
    expect(await renderSurface(deps(["primary", "later"], { later }), request)).toEqual({
      html: null,
      reason: "not-loaded",
    });
  });

  it("no-entry: the primary has no views/surface/index.njk", async () => {
    const primary = loaded("bare", false);
    expect(await renderSurface(deps(["bare"], { bare: primary }), request)).toEqual({
      html: null,
      reason: "no-entry",
    });
  });
});
