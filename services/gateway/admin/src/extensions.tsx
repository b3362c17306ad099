/**
 * Plugins' admin pages: the UI-asset manifest lists each active plugin's entries; an
 * entry for `surface: "admin"` becomes a page of the console. Its script is an ES module served by the
 * gateway (`/plugin-assets/…`, same origin, so the CSP allows it) exporting `mount(element, host)`; the
 * host gives it the session's fetch, the plugin's route base and navigation (docs/plugins.md, "Admin
 * pages"). The function `mount` returns may clean up when the page is left.
 */
import { useEffect, useRef, useState } from "preact/hooks";

import { sessionFetch } from "./api.js";
import { session } from "./session.js";
import { navigate, signal } from "./state.js";
import { Page, Problem } from "./ui.js";

export interface AdminExtension {
  readonly pluginId: string;
  readonly scripts: readonly string[];
  readonly styles: readonly string[];
}

interface Manifest {
  readonly entries?: ReadonlyArray<{ pluginId: string; surface: string; entryPath: string }>;
  readonly styleEntries?: ReadonlyArray<{ pluginId: string; surface: string; stylePath: string }>;
}

export const extensions = signal<readonly AdminExtension[]>([]);

/** Reads the manifest again (its ETag makes an unchanged one cheap); none when there is none yet. */
export async function loadExtensions(): Promise<void> {
  const response = await fetch("/manifests/plugin-ui-assets.manifest.json", { cache: "no-cache" }).catch(
    () => undefined,
  );
  if (response === undefined || !response.ok) return extensions.set([]);
  const manifest = (await response.json()) as Manifest;
  const byPlugin = new Map<string, { scripts: string[]; styles: string[] }>();
  for (const e of manifest.entries ?? []) {
    if (e.surface !== "admin") continue;
    const found = byPlugin.get(e.pluginId) ?? { scripts: [], styles: [] };
    found.scripts.push(`/plugin-assets/${e.entryPath}`);
    byPlugin.set(e.pluginId, found);
  }
  for (const s of manifest.styleEntries ?? []) {
    byPlugin.get(s.pluginId)?.styles.push(`/plugin-assets/${s.stylePath}`);
  }
  const next = [...byPlugin].map(([pluginId, v]) => ({ pluginId, ...v }));
  if (JSON.stringify(next) !== JSON.stringify(extensions.get())) extensions.set(next);
}

/**
 * Reads the manifest again until the set of pages changes or five seconds pass: after an activation or a
 * deactivation, which the registry publishes within a second or so.
 */
export async function followExtensions(): Promise<void> {
  const before = JSON.stringify(extensions.get());
  for (let i = 0; i < 10; i++) {
    await loadExtensions();
    if (JSON.stringify(extensions.get()) !== before) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** A plugin's page is listed for sessions that read plugins or hold a key of the plugin's own. */
export const mayOpen = (pluginId: string, permissions: readonly string[], canReadPlugins: boolean) =>
  canReadPlugins || permissions.some((key) => key === "*" || key.startsWith(`${pluginId}.`));

/** What a plugin's admin page is given (docs/sdk and docs/plugins.md describe it to plugin authors). */
export interface AdminHost {
  readonly pluginId: string;
  /** `/api/plugins/<pluginId>`: where the plugin's own routes are. */
  readonly routeBase: string;
  /** fetch with the session's token; a path without a leading `/` is under `routeBase`. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Moves the console to one of its pages (`/plugins`) or another plugin's (`/extensions/<id>`). */
  navigate(path: string): void;
  readonly session: {
    name: string;
    scope: string | null;
    workspaceKey: string | null;
    permissions: readonly string[];
  };
}

function hostFor(pluginId: string): AdminHost {
  const routeBase = `/api/plugins/${pluginId}`;
  const s = session.get();
  return {
    pluginId,
    routeBase,
    fetch: (path, init) => sessionFetch(path.startsWith("/") ? path : `${routeBase}/${path}`, init),
    navigate,
    session: {
      name: s?.name ?? "",
      scope: s?.scope ?? null,
      workspaceKey: s?.workspaceKey ?? null,
      permissions: s?.permissions ?? [],
    },
  };
}

type Mount = (element: HTMLElement, host: AdminHost) => void | (() => void) | Promise<void | (() => void)>;

export function ExtensionPage({ extension }: { extension: AdminExtension }) {
  const mountPoint = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const element = mountPoint.current;
    if (element === null) return undefined;
    let cleanup: (() => void) | undefined;
    let left = false;
    const links = extension.styles.map((href) => {
      const link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = href;
      document.head.append(link);
      return link;
    });
    setError(null);
    void (async () => {
      for (const script of extension.scripts) {
        const module = (await import(/* @vite-ignore */ script)) as { mount?: Mount };
        if (typeof module.mount !== "function") {
          throw new Error(`${script} exports no mount(element, host) function`);
        }
        const done = await module.mount(element, hostFor(extension.pluginId));
        if (left) done?.();
        else if (typeof done === "function") cleanup = done;
      }
    })().catch((e: unknown) => setError(`The plugin's page failed to load: ${(e as Error).message}`));
    return () => {
      left = true;
      cleanup?.();
      element.replaceChildren();
      for (const link of links) link.remove();
    };
  }, [extension]);
  return (
    <Page title={`Plugin ${extension.pluginId}`}>
      <Problem text={error} />
      <div class="extension" data-plugin={extension.pluginId} ref={mountPoint} />
    </Page>
  );
}
