import { createServer, type IncomingHttpHeaders, type Server } from "node:http";

export interface Received {
  /** The request's path and query. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
}

/**
 * A real HTTP receiver for webhook tests: records every request and answers with what `respond` says
 * (status, headers and body, "ok" by default), or never answers when it returns "hang".
 */
export class Receiver {
  readonly received: Received[] = [];
  respond: (r: Received) => { status: number; headers?: Record<string, string>; body?: string } | "hang" =
    () => ({ status: 200 });
  private server: Server | undefined;
  url = "";

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const r = {
          url: req.url ?? "",
          headers: req.headers,
          body: Buffer.concat(chunks).toString("utf8"),
          at: Date.now(),
        };
        this.received.push(r);
        const answer = this.respond(r);
        if (answer === "hang") return;
        res.writeHead(answer.status, answer.headers).end(answer.body ?? "ok");
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", () => resolve()));
    this.url = `http://127.0.0.1:${(this.server?.address() as { port: number }).port}/hook`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  /** Those of `userIds` no `user.created` delivery has come for yet. */
  usersMissing(userIds: readonly string[]): string[] {
    const seen = new Set(
      this.received.map((r) => (JSON.parse(r.body) as { data: { userId?: string } }).data.userId),
    );
    return userIds.filter((id) => !seen.has(id));
  }

  /** Until a `user.created` delivery has come for each of `userIds` (at least once). */
  async waitForUsers(userIds: readonly string[], timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const missing = this.usersMissing(userIds);
      if (missing.length === 0) return;
      if (Date.now() > until) throw new Error(`no delivery for ${missing.length} of ${userIds.length} users`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async waitFor(count: number, timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.received.length < count) {
      if (Date.now() > until) throw new Error(`receiver got ${this.received.length} of ${count} requests`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}
