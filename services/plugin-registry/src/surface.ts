/**
 * Server-side rendering of a workspace's surface (ADR 0008).
 * The primary plugin of the workspace's chain (active, entitled) renders its `views/surface/index.njk`
 * with the whole chain's `views/surface/` directories on the loader path, from the packages this replica
 * verified when it loaded them. No chain, a primary not loaded here, no entry template or a template
 * error: the gateway serves the shell instead (and logs why, but for no chain). Render context: SurfaceKey `default`, SurfaceType `spa`,
 * Locale `de`, tokens (the theme's values, with `themePluginId` when the workspace has a theme plugin),
 * the workspace and its route, the theme, its values as `settings`, the navigation and the snippets.
 */
import { stat } from "node:fs/promises";
import { join } from "node:path";

import type { PublicWorkspace, RenderedSurface, SurfaceData } from "@svc/contracts";
import type { Logger } from "@svc/observability";

import type { SurfaceRenderer } from "./runtime/renderer.js";
import type { PluginRuntime } from "./runtime/runtime.js";
import { themeOf, type ThemeTables } from "./themes.js";

export interface SurfaceDeps {
  /** The workspace's public chain: its active, entitled plugins in order (`publicChain`). */
  readonly chain: (workspaceKey: string) => Promise<readonly string[]>;
  readonly themes: Pick<ThemeTables, "selected" | "storedValues">;
  /** The packages this replica verified and loaded. */
  readonly runtime: Pick<PluginRuntime, "packageOf">;
  readonly renderer: Pick<SurfaceRenderer, "render">;
  readonly log: Pick<Logger, "warn">;
}

const isFile = (path: string) =>
  stat(path).then(
    (s) => s.isFile(),
    () => false,
  );

export async function renderSurface(
  deps: SurfaceDeps,
  request: { workspace: PublicWorkspace; publicBaseUrl: string; path: string; data: SurfaceData },
): Promise<RenderedSurface> {
  const wk = request.workspace.workspace.key;
  const chain = await deps.chain(wk);
  const roots = chain.flatMap((pluginId) => {
    const found = deps.runtime.packageOf(pluginId);
    return found === undefined
      ? []
      : [{ pluginId, dir: join(found.root, "views", "surface"), sha256: found.sha256 }];
  });
  const primary = roots[0];
  if (chain.length === 0) return { html: null, reason: "no-chain" };
  // The primary is active but this replica holds no verified copy of it (its load failed here, or it is
  // being loaded): the gateway serves the shell and logs why.
  if (primary === undefined || primary.pluginId !== chain[0]) return { html: null, reason: "not-loaded" };
  if (!(await isFile(join(primary.dir, "index.njk")))) return { html: null, reason: "no-entry" };
  const theme = await themeOf(deps.themes, wk);
  const tokens: Record<string, string> = { ...theme.valuesByKey };
  if (theme.themePluginId !== null) tokens.themePluginId = theme.themePluginId;
  const context = {
    SurfaceKey: "default",
    SurfaceType: "spa",
    Locale: "de",
    tokens,
    workspace: request.workspace.workspace,
    route: { ...request.workspace.route, publicBaseUrl: request.publicBaseUrl, path: request.path },
    theme,
    settings: theme.valuesByKey,
    navigation: request.data.navigation,
    snippets: request.data.snippets,
    chain,
  };
  try {
    const html = await deps.renderer.render({
      chainKey: roots.map((r) => `${r.pluginId}@${r.sha256}`).join(","),
      roots: roots.map((r) => ({ pluginId: r.pluginId, dir: r.dir })),
      entry: `@${primary.pluginId}/index.njk`,
      context,
    });
    return { html, reason: "rendered" };
  } catch (error) {
    deps.log.warn(
      { workspaceKey: wk, pluginId: primary.pluginId, error: (error as Error).message },
      "a surface template failed; the shell is served instead",
    );
    return { html: null, reason: "template-error" };
  }
}
