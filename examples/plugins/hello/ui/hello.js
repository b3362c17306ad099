/* global document */
// The example plugin's browser entry (listed in plugin-ui-assets.manifest.json while the plugin is active).
// It reads the workspace context that bootstrap.js sets and greets the workspace in the page.
const context = globalThis.__SVC_WORKSPACE_CONTEXT__;
const name = context?.workspace?.name ?? "world";
const banner = document.createElement("p");
banner.className = "hello-banner";
banner.textContent = `Hello, ${name}!`;
document.body.prepend(banner);
