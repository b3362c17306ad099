/**
 * The example plugin's entry module: `entryTypeName` in registry.json names this export. What the host
 * calls on it (activation, routes, event handlers) is the plugin contract of the next platform issue; the
 * package, its signature and its install already work (docs/plugins.md).
 */
export class HelloPlugin {
  /** Called when the plugin is activated for a workspace. */
  activate(context) {
    this.workspaceKey = context?.workspaceKey ?? null;
  }

  /** A greeting for the workspace surface (views/surface/index.njk shows it). */
  greeting(name = "world") {
    return `Hello, ${name}!`;
  }
}
