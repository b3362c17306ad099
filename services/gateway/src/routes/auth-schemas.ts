/**
 * The sign-in body as the HTTP route takes it (with the `username` alias), for the route and the OpenAPI
 * description; its reply and the keys are rbac's message contracts (@svc/contracts).
 */
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
