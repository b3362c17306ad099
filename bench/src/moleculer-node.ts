/**
 * Reference 2: the peer a Node user would otherwise pick. ROLE=service runs a moleculer broker with a
 * `resolver.resolve` action; ROLE=web runs moleculer-web forwarding GET /workspace/public/resolve to it.
 * Both talk over the same NATS server as the platform, with their own namespace.
 */
import { ServiceBroker } from "moleculer";
import ApiGateway from "moleculer-web";

const role = process.env.ROLE ?? "service";
const broker = new ServiceBroker({
  namespace: process.env.NAMESPACE ?? "bench",
  nodeID: `${role}-${process.pid}`,
  transporter: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
  logger: false,
  metrics: false,
  tracing: false,
});

if (role === "service") {
  broker.createService({
    name: "resolver",
    actions: {
      resolve() {
        return { resolved: true, workspaceKey: "default" };
      },
    },
  });
} else {
  broker.createService({
    name: "api",
    mixins: [ApiGateway],
    settings: {
      port: Number(process.env.PORT ?? 0),
      ip: "127.0.0.1",
      logRequest: null,
      logResponse: null,
      routes: [
        {
          path: "/",
          aliases: { "GET /workspace/public/resolve": "resolver.resolve" },
          mappingPolicy: "restrict",
        },
      ],
    },
  });
}
await broker.start();
if (role === "web") await broker.waitForServices(["resolver"], 30_000);
process.stdout.write(`ready ${role}\n`);
process.on("SIGTERM", () => void broker.stop().then(() => process.exit(0)));
