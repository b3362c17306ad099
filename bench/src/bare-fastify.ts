/** Reference 1: one Fastify process answering the same JSON with no hop (the ceiling of one process). */
import Fastify from "fastify";

const body = JSON.stringify({ resolved: true, workspaceKey: "default" });
const app = Fastify({ logger: false });
app.get("/workspace/public/resolve", (_request, reply) => {
  void reply.header("content-type", "application/json; charset=utf-8").send(body);
});
const address = await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT ?? 0) });
process.stdout.write(`listening ${address}\n`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
