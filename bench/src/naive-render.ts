/**
 * The naive peer of `GET /surface/render`: one bare Fastify process rendering the same nunjucks
 * templates (the three-plugin chain's directories, TEMPLATE_DIRS, colon-separated) on every request, with
 * no compiled-template cache and no page cache, as a first implementation would.
 */
import Fastify from "fastify";
import nunjucks from "nunjucks";

const dirs = (process.env.TEMPLATE_DIRS ?? "").split(":").filter(Boolean);
const context = {
  SurfaceKey: "default",
  SurfaceType: "spa",
  Locale: "de",
  tokens: { accent: "#3366ff" },
  workspace: { key: "default", name: "Default workspace", type: "base" },
  settings: { accent: "#3366ff" },
  navigation: [{ key: "about", title: "About", fullPath: "/about" }],
  snippets: { footer: "made by us" },
};
const app = Fastify({ logger: false });
app.get("/surface/render", (_request, reply) => {
  const env = new nunjucks.Environment(new nunjucks.FileSystemLoader(dirs, { noCache: true }), {
    autoescape: true,
  });
  const html = env.render("index.njk", context);
  void reply.type("text/html; charset=utf-8").send(html);
});
const address = await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT ?? 0) });
process.stdout.write(`listening ${address}\n`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
