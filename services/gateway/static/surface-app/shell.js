/* global document, window, location, fetch, console, URLSearchParams */
// The single-page-app shell of a workspace: it loads bootstrap.js for the page's path,
// which sets window.__SVC_WORKSPACE_CONTEXT__, then the workspace-surface scripts and styles the UI-asset
// manifest lists for the active plugins. Served from /surface-app/ and as the fallback of /surface/render.
const params = new URLSearchParams(location.search);
const path = params.get("path") ?? (location.pathname.startsWith("/surface-app/") ? "/" : location.pathname);

function load(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = resolve;
    script.onerror = reject;
    document.head.append(script);
  });
}

async function start() {
  await load(`/workspace/public/bootstrap.js?path=${encodeURIComponent(path)}`);
  const context = window.__SVC_WORKSPACE_CONTEXT__;
  document.getElementById("svc-workspace-name").textContent = context.workspace.name;
  document.title = context.workspace.name;
  document.getElementById("svc-status").textContent = "";
  const manifest = await fetch("/manifests/plugin-ui-assets.manifest.json").then((r) =>
    r.ok ? r.json() : null,
  );
  for (const style of manifest?.styleEntries ?? []) {
    if (style.surface !== "workspace") continue;
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = `/plugin-assets/${style.stylePath}`;
    document.head.append(link);
  }
  for (const entry of manifest?.entries ?? []) {
    if (entry.surface !== "workspace") continue;
    const script = document.createElement("script");
    script.type = "module";
    script.src = `/plugin-assets/${entry.entryPath}`;
    document.head.append(script);
  }
}

start().catch((error) => {
  document.getElementById("svc-status").textContent = "The workspace could not be loaded.";
  console.error(error);
});
