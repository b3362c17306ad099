/**
 * The gateway's request validation, compiled at start (development, tests) or at a route's first request
 * (production): the same answers either way, and the lazy mode really defers the compilation.
 */
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";

import { validatorCompiler } from "./validation.js";

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function appWith(lazy: boolean) {
  const app = Fastify();
  apps.push(app);
  app.setValidatorCompiler(validatorCompiler({ lazy }));
  app.post(
    "/things",
    {
      schema: {
        querystring: {
          type: "object",
          properties: { limit: { type: "integer", minimum: 1 } },
          additionalProperties: false,
        },
        body: {
          type: "object",
          required: ["name"],
          properties: { name: { type: "string", minLength: 1 }, size: { type: "integer", default: 3 } },
          additionalProperties: false,
        },
      },
    },
    async (request) => ({ body: request.body, query: request.query }),
  );
  await app.ready();
  return app;
}

const requests = [
  { url: "/things?limit=5", payload: { name: "a", extra: true } },
  { url: "/things", payload: { name: "" } },
  { url: "/things", payload: { size: 2 } },
  { url: "/things", payload: { name: "b", size: "4" } },
  { url: "/things?limit=0", payload: { name: "c" } },
  { url: "/things?limit=x", payload: { name: "c" } },
];

describe("request validation", () => {
  it("answers the same compiled lazily as at start: defaults, coercion of the query only, every violation", async () => {
    const eager = await appWith(false);
    const lazy = await appWith(true);
    for (const request of requests) {
      const [a, b] = await Promise.all(
        [eager, lazy].map((app) => app.inject({ method: "POST", ...request })),
      );
      expect({ status: b?.statusCode, body: b?.json() }).toEqual({ status: a?.statusCode, body: a?.json() });
    }
    const ok = await lazy.inject({
      method: "POST",
      url: "/things?limit=5",
      payload: { name: "a", extra: 1 },
    });
    expect(ok.json()).toEqual({ body: { name: "a", size: 3 }, query: { limit: 5 } });
    const bad = await lazy.inject({ method: "POST", url: "/things", payload: { size: "4" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/name/);
    expect(bad.json().message).toMatch(/size/);
  });

  it("compiles a schema lazily only when its route is first called", () => {
    const refused = { schema: { type: "no-such-type" }, httpPart: "body", method: "POST", url: "/x" };
    expect(() => validatorCompiler({ lazy: false })(refused)).toThrow(/schema is invalid/);
    const validate = validatorCompiler({ lazy: true })(refused);
    expect(() => validate({})).toThrow(/schema is invalid/);
  });
});
