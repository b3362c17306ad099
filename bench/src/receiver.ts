/**
 * What the webhook benchmarks share: a local receiver that answers 204 to every delivery and hands each
 * envelope's `data` over with the receipt time, and the environment of a dispatcher delivering to it.
 */
import { createServer } from "node:http";

import { productionEnv } from "./env.js";

export interface Receiver {
  /** The URL subscriptions deliver to. */
  readonly target: string;
  close(): void;
}

export async function startReceiver<D>(onDelivery: (data: D, at: number) => void): Promise<Receiver> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = Date.now();
      onDelivery((JSON.parse(Buffer.concat(chunks).toString()) as { data: D }).data, at);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    target: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** A built dispatcher's environment: production mode, its run's names, deliveries to 127.0.0.1 allowed. */
export function dispatcherEnv(o: Parameters<typeof productionEnv>[0]) {
  return {
    ...process.env,
    ...productionEnv(o),
    BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  };
}
