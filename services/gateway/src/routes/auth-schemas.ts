/** The shapes of sign-in and of the token-verification keys, for the route and for the OpenAPI description. */
import { Type } from "@sinclair/typebox";

export const LoginBody = Type.Object(
  {
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: "The user's name" })),
    userName: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: "Alias of `username`" }),
    ),
    password: Type.String({ minLength: 1, maxLength: 200 }),
    workspaceKey: Type.Optional(
      Type.Union([Type.String({ maxLength: 63 }), Type.Null()], {
        description:
          "Sign in to one workspace: a workspace-scoped session holding the keys of your member roles " +
          "there. Absent or null: a platform session with the keys of your global role.",
      }),
    ),
  },
  { additionalProperties: false },
);

export const LoginReply = Type.Object({
  accessToken: Type.String({
    description: "An ES256-signed JWT; send it as `Authorization: Bearer <accessToken>`",
  }),
  tokenType: Type.Literal("Bearer"),
  expiresIn: Type.Integer({ description: "Seconds until the token expires" }),
});

export const Jwks = Type.Object({
  keys: Type.Array(
    Type.Object(
      {
        kty: Type.String(),
        kid: Type.String(),
        alg: Type.String(),
        use: Type.Optional(Type.String()),
        crv: Type.Optional(Type.String()),
        x: Type.Optional(Type.String()),
        y: Type.Optional(Type.String()),
      },
      { additionalProperties: true },
    ),
  ),
});
