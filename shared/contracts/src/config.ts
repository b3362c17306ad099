/**
 * The configuration routes: every running service's settings and run-time values (`config.describe` and
 * `config.check` gathered from every replica). Served by the resolver process under its subjects
 * (`resolver.config.*`, ADR 0015), declared here under their own name.
 */
import { Type } from "@sinclair/typebox";

import { Nullable } from "./common.js";
import { defineRoutes } from "./route.js";

export const configRoutes = defineRoutes("resolver", {
  "config.definitions": {
    method: "GET",
    path: "/api/config/definitions",
    permission: "config.read",
    platformOnly: true,
    summary:
      "Every setting of the running services: type, default, whether it can change at run time, whether secret",
    reply: Type.Object({
      items: Type.Array(
        Type.Object({
          variable: Type.String(),
          owner: Type.String(),
          type: Type.String(),
          defaultText: Type.String(),
          description: Type.String(),
          changeable: Type.Boolean(),
          secret: Type.Boolean(),
        }),
      ),
    }),
  },
  "config.effective": {
    method: "GET",
    path: "/api/config/effective",
    permission: "config.read",
    platformOnly: true,
    summary:
      "The values in force and where each comes from (default, environment, stored); secrets never shown",
    reply: Type.Object({
      items: Type.Array(
        Type.Object({
          variable: Type.String(),
          owner: Type.String(),
          value: Nullable(Type.String()),
          source: Type.Union([Type.Literal("default"), Type.Literal("environment"), Type.Literal("stored")]),
          secret: Type.Boolean(),
        }),
      ),
    }),
  },
  "config.put": {
    method: "PUT",
    path: "/api/config/values",
    permission: "config.update",
    platformOnly: true,
    summary: "Store run-time values of changeable settings (null: back to the environment or default)",
    body: Type.Object(
      {
        values: Type.Record(
          Type.String({ pattern: "^[A-Za-z][A-Za-z0-9_]{0,199}$" }),
          Nullable(Type.Union([Type.String({ maxLength: 2_000 }), Type.Number(), Type.Boolean()])),
          { minProperties: 1, maxProperties: 100 },
        ),
      },
      { additionalProperties: false },
    ),
    reply: Type.Object({ stored: Type.Record(Type.String(), Type.String()) }),
  },
});
