/**
 * What the gateway is told about a workspace's surface: why the shell is served instead (it logs every
 * reason but an empty chain), or what the primary plugin rendered, with which templates and context. The
 * chain, the theme and the runtime's loaded packages are in memory; the renderer records what it was asked.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { PublicWorkspace } from "@svc/contracts";
import { afterAll, describe, expect, it } from "vitest";

import { renderSurface, type SurfaceDeps } from "./surface.js";

const dir = mkdtempSync(join(tmpdir(), "svc-surface-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A plugin loaded on this replica: with or without views/surface/index.njk. */
function loaded(pluginId: string, withEntry: boolean) {
  const root = join(dir, pluginId);
  mkdirSync(join(root, "views", "surface"), { recursive: true });
  if (withEntry) writeFileSync(join(root, "views", "surface", "index.njk"), "<p>{{ workspace.key }}</p>");
  return { root, sha256: pluginId.padEnd(64, "0") };
}

type RenderCall = Parameters<SurfaceDeps["renderer"]["render"]>[0];

function deps(
  chain: string[],
  packages: Record<string, { root: string; sha256: string }>,
  render: (call: RenderCall) => Promise<string> = async () => "<p>rendered</p>",
) {
  const calls: RenderCall[] = [];
  const warnings: unknown[] = [];
  const d: SurfaceDeps = {
    chain: async (workspaceKey) => (workspaceKey === "ws-a" ? chain : []),
    themes: {
      selected: async () => ({
        pluginId: "acme.theme",
        version: "1.0.0",
        theme: { fields: [{ key: "accent", type: "color", default: "#123456" }] },
      }),
      storedValues: async () => new Map([["accent", "#abcdef"]]),
    } as unknown as SurfaceDeps["themes"],
    runtime: { packageOf: (id: string) => packages[id] },
    renderer: {
      render: (call) => {
        calls.push(call);
        return render(call);
      },
    },
    log: { warn: (...args: unknown[]) => void warnings.push(args) },
  };
  return { d, calls, warnings };
}

const request = {
  workspace: { workspace: { key: "ws-a" } } as unknown as PublicWorkspace,
  publicBaseUrl: "https://a.example",
  path: "/",
  data: { navigation: [], snippets: {} },
};

describe("renderSurface's reasons for the shell", () => {
  it("no-chain: the workspace's chain holds no active, entitled plugin", async () => {
    expect(await renderSurface(deps([], {}).d, request)).toEqual({ html: null, reason: "no-chain" });
  });

  it("not-loaded: the primary is active but this replica holds no copy of it", async () => {
    const later = loaded("later", true);
    expect(await renderSurface(deps(["primary", "later"], { later }).d, request)).toEqual({
      html: null,
      reason: "not-loaded",
    });
  });

  it("no-entry: the primary has no views/surface/index.njk", async () => {
    const primary = loaded("bare", false);
    expect(await renderSurface(deps(["bare"], { bare: primary }).d, request)).toEqual({
      html: null,
      reason: "no-entry",
    });
  });

  it("rendered: the primary's entry, with the whole chain's views on the path and the theme's tokens", async () => {
    const primary = loaded("shop", true);
    const extra = loaded("blog", true);
    const { d, calls } = deps(["shop", "blog", "gone"], { shop: primary, blog: extra });
    expect(await renderSurface(d, request)).toEqual({ html: "<p>rendered</p>", reason: "rendered" });
    expect(calls).toHaveLength(1);
    const call = calls[0] as RenderCall;
    expect(call.entry).toBe("@shop/index.njk");
    // A plugin of the chain not loaded here ("gone") has no directory to read: it is left out.
    expect(call.roots).toEqual([
      { pluginId: "shop", dir: join(primary.root, "views", "surface") },
      { pluginId: "blog", dir: join(extra.root, "views", "surface") },
    ]);
    // The compiled templates are kept per chain and package: a new version is a new key.
    expect(call.chainKey).toBe(`shop@${primary.sha256},blog@${extra.sha256}`);
    expect(call.context).toMatchObject({
      SurfaceKey: "default",
      tokens: { accent: "#abcdef", themePluginId: "acme.theme" },
      route: { publicBaseUrl: "https://a.example", path: "/" },
      chain: ["shop", "blog", "gone"],
    });
  });

  it("template-error: a template that fails serves the shell and is logged with the plugin", async () => {
    const primary = loaded("broken", true);
    const { d, warnings } = deps(["broken"], { broken: primary }, async () => {
      throw new Error("unexpected end of tag");
    });
    expect(await renderSurface(d, request)).toEqual({ html: null, reason: "template-error" });
    expect(JSON.stringify(warnings)).toContain('"pluginId":"broken"');
  });
});
