/**
 * The example plugin's backend: `entryTypeName` in registry.json names this export. The host constructs it
 * in the plugin's own worker with the host API (docs/plugins.md, "The entry module"), calls `activate`,
 * then calls the methods registry.json names as route handlers; `deactivate` before it is unloaded.
 */
export class HelloPlugin {
  constructor(host) {
    this.host = host;
    this.greetings = 0;
  }

  async activate() {
    // A publisher decorator: every event this plugin publishes carries where it came from.
    this.host.events.decorate((event, next) =>
      next({ ...event, payload: { ...event.payload, source: this.host.pluginId } }),
    );
    this.host.log.info("hello is active", { version: this.host.version });
  }

  async deactivate() {
    this.host.log.info("hello is stopping", { greetings: this.greetings });
  }

  /** GET /api/plugins/hello/greeting?name=… (any signed-in caller). */
  async greet(request) {
    const name = typeof request.query.name === "string" ? request.query.name.slice(0, 100) : "world";
    this.greetings += 1;
    return { status: 200, body: { greeting: `Hello, ${name}!`, caller: request.principal.subject } };
  }

  /** GET /api/plugins/hello/stats (key hello.greeting.read): how many greetings this worker gave. */
  async stats() {
    return { greetings: this.greetings };
  }

  /**
   * POST /api/plugins/hello/greetings (key hello.greeting.update): publishes `hello.greeted`, whose
   * `greeting` field is sensitive (masked in webhook deliveries).
   */
  async sendGreeting(request) {
    const body = request.body ?? {};
    const to = typeof body.to === "string" ? body.to.slice(0, 100) : "world";
    const greeting = typeof body.greeting === "string" ? body.greeting.slice(0, 500) : `Hello, ${to}!`;
    // The workspace is the caller's, not one the body names: a workspace session publishes into its own
    // workspace; a platform session may name one. The host refuses a workspace whose chain lacks this
    // plugin, and any event name outside `hello.` (docs/plugins.md, "Events").
    const principal = request.principal ?? {};
    const workspaceKey =
      principal.scope === "workspace"
        ? principal.workspaceKey
        : typeof body.workspaceKey === "string"
          ? body.workspaceKey
          : null;
    await this.host.events.publish("hello.greeted", workspaceKey, { to, greeting });
    return { status: 202, body: { published: "hello.greeted", to } };
  }
}
