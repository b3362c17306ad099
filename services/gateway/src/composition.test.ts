/**
 * The gateway's Fastify plugins say what they stand on: registered without it, the app refuses to start
 * (naming what is missing), instead of failing on the first request that needs it.
 */
import Fastify from "fastify";
import { describe, expect, it } from "vitest";

import { edgePlugin } from "./plugins/edge.js";
import { problemsPlugin } from "./plugins/problems.js";
import { type SurfaceOptions, surfacePlugin } from "./routes/surface.js";

const problemsOptions = { problemsBaseUrl: "https://errors.example/", log: undefined as never };

describe("the gateway's plugin composition", () => {
  it("refuses the problems plugin without the edge's route table", async () => {
    const app = Fastify();
    void app.register(problemsPlugin, problemsOptions);
    await expect(app.ready()).rejects.toThrow(/allowedMethods/);
  });

  it("refuses the surface without the problems plugin's fallback list", async () => {
    const app = Fastify();
    void app.register(edgePlugin, { problemsBaseUrl: "https://errors.example/" });
    void app.register(surfacePlugin, {} as SurfaceOptions);
    await expect(app.ready()).rejects.toThrow(/addNotFoundFallback/);
  });
});
