/** Routes rbac owns: roles and the key catalogue, users, memberships, integrations, notifications. */
import { type Static, Type } from "@sinclair/typebox";
import type { JSONWebKeySet } from "jose";

import {
  idParams,
  Nullable,
  Page,
  pageFields,
  PageQuery,
  PermissionKeyString,
  RoleName,
  userParams,
  Uuid,
  wkParams,
  wkUserParams,
  WorkspaceKey,
} from "./common.js";
import { defineBroadcasts, defineMessages } from "./messages.js";
import { defineRoutes } from "./route.js";

export const UserView = Type.Object({
  id: Uuid,
  userName: Type.String(),
  displayName: Type.String(),
  email: Nullable(Type.String()),
  isActive: Type.Boolean(),
  role: Nullable(Type.String()),
  createdAtUtc: Type.String(),
  updatedAtUtc: Type.String(),
});
export const RoleView = Type.Object({
  name: Type.String(),
  description: Type.String(),
  scope: Type.Union([Type.Literal("platform"), Type.Literal("workspace")]),
  permissions: Type.Array(Type.String()),
  source: Type.String(),
});
const PermissionKeyView = Type.Object({
  key: Type.String(),
  source: Type.String(),
  description: Type.String(),
});
const Timestamp = Type.String({ format: "date-time" });
const IntegrationView = Type.Object({
  id: Uuid,
  name: Type.String(),
  clientId: Type.String(),
  workspaceKey: Nullable(Type.String()),
  permissions: Type.Array(Type.String()),
  createdAtUtc: Timestamp,
});
const MemberRoles = Type.Object({ userId: Uuid, roles: Type.Array(Type.String()) });
const Email = Type.Optional(Nullable(Type.String({ format: "email", maxLength: 320 })));

const NotificationView = Type.Object({
  id: Type.String(),
  /** The event it came from: job.dead-lettered, webhook.circuit-opened, plugin.refused, flow.notification. */
  kind: Type.String(),
  /** `flow`: the title and detail are a flow author's text (a notify action), not the platform's. */
  origin: Type.Union([Type.Literal("platform"), Type.Literal("flow")]),
  title: Type.String(),
  detail: Nullable(Type.String()),
  workspaceKey: Nullable(Type.String()),
  data: Type.Unknown(),
  createdAtUtc: Type.String(),
  readAtUtc: Nullable(Type.String()),
});

export const rbacRoutes = defineRoutes("rbac", {
  // Notifications
  "notifications.list": {
    method: "GET",
    path: "/api/notifications",
    permission: "notification.read",
    summary: "The caller's notifications, unread first, newest first",
    query: Type.Object(
      { unreadOnly: Type.Optional(Type.Boolean()), ...pageFields },
      { additionalProperties: false },
    ),
    reply: Page(NotificationView),
  },
  "notifications.read": {
    method: "PUT",
    path: "/api/notifications/:id/read",
    permission: "notification.read",
    summary: "Mark one of the caller's notifications read",
    params: idParams,
    reply: NotificationView,
  },
  // Roles and the key catalogue
  "roles.list": {
    method: "GET",
    path: "/api/rbac/roles",
    permission: "role.read",
    summary: "List roles",
    platformOnly: true,
    reply: Type.Array(RoleView),
  },
  "permissions.list": {
    method: "GET",
    path: "/api/rbac/permissions",
    permission: "role.read",
    summary: "List permission keys",
    platformOnly: true,
    reply: Type.Array(PermissionKeyView),
  },
  "role-assignments.list": {
    method: "GET",
    path: "/api/rbac/users",
    permission: "role.read",
    summary: "List users' global role assignments",
    platformOnly: true,
    query: PageQuery,
    reply: Page(Type.Object({ userId: Uuid, userName: Type.String(), role: Nullable(Type.String()) })),
  },
  "roles.put": {
    method: "PUT",
    path: "/api/rbac/roles/:role",
    permission: "role.update",
    summary: "Create or replace a role (revokes its holders' sessions)",
    platformOnly: true,
    params: Type.Object({ role: RoleName }),
    body: Type.Object(
      {
        permissions: Type.Array(PermissionKeyString, { maxItems: 500, uniqueItems: true }),
        description: Type.Optional(Type.String({ maxLength: 500 })),
        scope: Type.Optional(Type.Union([Type.Literal("platform"), Type.Literal("workspace")])),
      },
      { additionalProperties: false },
    ),
    reply: RoleView,
  },
  "roles.delete": {
    method: "DELETE",
    path: "/api/rbac/roles/:role",
    permission: "role.update",
    summary: "Delete a role (revokes its holders' sessions)",
    platformOnly: true,
    params: Type.Object({ role: RoleName }),
  },
  "role-assignments.put": {
    method: "PUT",
    path: "/api/rbac/users/:userId",
    permission: "role.update",
    summary: "Set a user's global role",
    platformOnly: true,
    params: userParams,
    body: Type.Object({ role: RoleName }, { additionalProperties: false }),
    reply: Type.Object({ userId: Uuid, userName: Type.String(), role: Type.String() }),
  },
  "role-assignments.delete": {
    method: "DELETE",
    path: "/api/rbac/users/:userId",
    permission: "role.update",
    summary: "Remove a user's global role",
    platformOnly: true,
    params: userParams,
  },
  // Users
  "users.create": {
    method: "POST",
    path: "/api/users",
    permission: "user.create",
    summary: "Create a user",
    platformOnly: true,
    body: Type.Object(
      {
        userName: Type.String({ pattern: "^[A-Za-z0-9._@+-]{1,100}$" }),
        password: Type.String({ minLength: 12, maxLength: 200 }),
        displayName: Type.Optional(Type.String({ maxLength: 200 })),
        email: Email,
      },
      { additionalProperties: false },
    ),
    reply: UserView,
  },
  "users.list": {
    method: "GET",
    path: "/api/users",
    permission: "user.read",
    summary: "List users (a workspace session sees its members)",
    query: PageQuery,
    reply: Page(UserView),
  },
  "users.get": {
    method: "GET",
    path: "/api/users/:userId",
    permission: "user.read",
    summary: "Get a user (workspace-filtered)",
    params: userParams,
    reply: UserView,
  },
  "users.export": {
    method: "GET",
    path: "/api/users/:userId/data-export",
    permission: "user.read",
    summary: "Export everything stored about a user",
    platformOnly: true,
    params: userParams,
    reply: Type.Object({
      exportedAtUtc: Timestamp,
      user: UserView,
      memberships: Type.Array(
        Type.Object({
          workspaceKey: Type.String(),
          createdAtUtc: Timestamp,
          roles: Type.Array(Type.String()),
        }),
      ),
      sessions: Type.Array(
        Type.Object({
          id: Type.String(),
          workspaceKey: Nullable(Type.String()),
          roles: Type.Array(Type.String()),
          createdAtUtc: Timestamp,
          expiresAtUtc: Timestamp,
          revokedAtUtc: Nullable(Timestamp),
        }),
      ),
    }),
  },
  "users.update": {
    method: "PUT",
    path: "/api/users/:userId",
    permission: "user.update",
    summary: "Update a user",
    platformOnly: true,
    params: userParams,
    body: Type.Object(
      {
        displayName: Type.Optional(Type.String({ maxLength: 200 })),
        email: Email,
        password: Type.Optional(Type.String({ minLength: 12, maxLength: 200 })),
      },
      { additionalProperties: false },
    ),
    reply: UserView,
  },
  "users.activation": {
    method: "PUT",
    path: "/api/users/:userId/activation",
    permission: "user.update",
    summary: "Activate or deactivate a user",
    platformOnly: true,
    params: userParams,
    query: Type.Object({ isActive: Type.Boolean() }, { additionalProperties: false }),
    reply: UserView,
  },
  "users.delete": {
    method: "DELETE",
    path: "/api/users/:userId",
    permission: "user.delete",
    summary: "Delete a user",
    platformOnly: true,
    params: userParams,
  },
  // Memberships
  "members.list": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey/members",
    permission: ["membership.read", "workspace.read"],
    summary: "List a workspace's members",
    params: wkParams,
    query: PageQuery,
    reply: Page(Type.Composite([UserView, Type.Object({ roles: Type.Array(Type.String()) })])),
  },
  "members.put": {
    method: "PUT",
    path: "/api/workspaces/:workspaceKey/members/:userId",
    permission: ["membership.update", "workspace.update"],
    summary: "Add a member (201 when added, 200 when already a member)",
    params: wkUserParams,
    reply: Type.Object({ workspaceKey: Type.String(), userId: Uuid, roles: Type.Array(Type.String()) }),
  },
  "members.delete": {
    method: "DELETE",
    path: "/api/workspaces/:workspaceKey/members/:userId",
    permission: ["membership.delete", "workspace.update"],
    summary: "Remove a member",
    params: wkUserParams,
  },
  "member-roles.get": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey/members/:userId/roles",
    permission: "membership.read",
    summary: "A member's roles",
    params: wkUserParams,
    reply: MemberRoles,
  },
  "member-roles.put": {
    method: "PUT",
    path: "/api/workspaces/:workspaceKey/members/:userId/roles",
    permission: "membership.update",
    summary: "Replace a member's roles",
    params: wkUserParams,
    body: Type.Object(
      { roles: Type.Array(RoleName, { maxItems: 50, uniqueItems: true }) },
      { additionalProperties: false },
    ),
    reply: MemberRoles,
  },
  // Integrations and the key catalogue
  "integrations.list": {
    method: "GET",
    path: "/api/security/integrations",
    permission: "integration.read",
    summary: "List integrations (API clients)",
    reply: Type.Array(IntegrationView),
  },
  "integrations.create": {
    method: "POST",
    secretReply: true,
    path: "/api/security/integrations",
    permission: "integration.manage",
    summary: "Create an integration; its secret is shown once",
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 200 }),
        workspaceKey: Type.Optional(Nullable(WorkspaceKey)),
        permissions: Type.Optional(Type.Array(PermissionKeyString, { maxItems: 200, uniqueItems: true })),
      },
      { additionalProperties: false },
    ),
    reply: Type.Composite([
      Type.Omit(IntegrationView, ["createdAtUtc"]),
      Type.Object({ clientSecret: Type.String({ description: "Shown once, never again" }) }),
    ]),
  },
  "integrations.delete": {
    method: "DELETE",
    path: "/api/security/integrations/:id",
    permission: "integration.manage",
    summary: "Delete an integration",
    params: Type.Object({ id: Uuid }),
  },
  "security.permissions.list": {
    method: "GET",
    path: "/api/security/rbac/permissions",
    permission: "role.read",
    summary: "Every permission key, plugin-declared ones included",
    platformOnly: true,
    reply: Type.Array(PermissionKeyView),
  },
});

/** rbac's sign-in as the gateway forwards it (the HTTP body's `username` alias already resolved). */
export const LoginRequest = Type.Object({
  userName: Type.String({ minLength: 1, maxLength: 100 }),
  password: Type.String({ minLength: 1, maxLength: 200 }),
  workspaceKey: Type.Optional(Nullable(Type.String({ maxLength: 63 }))),
});
export type LoginRequest = Static<typeof LoginRequest>;

export const LoginReply = Type.Object({
  accessToken: Type.String({
    description: "An ES256-signed JWT; send it as `Authorization: Bearer <accessToken>`",
  }),
  tokenType: Type.Literal("Bearer"),
  expiresIn: Type.Integer({ description: "Seconds until the token expires" }),
});
export type LoginReply = Static<typeof LoginReply>;

/** The public keys that verify access tokens, as JOSE's JSON Web Key Set. */
export const Jwks = Type.Unsafe<JSONWebKeySet>(
  Type.Object({
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
  }),
);

/** What rbac answers to the other services. */
export const rbacMessages = defineMessages("rbac", {
  "auth.login": {
    summary: "Signs a user in and issues an access token",
    request: LoginRequest,
    reply: LoginReply,
  },
  "auth.logout": {
    summary: "Ends a session (POST /api/auth/logout): revoked on every gateway; false when it was not open",
    request: Type.Object({
      sessionId: Type.String({ format: "uuid" }),
      subject: Type.String({ maxLength: 200 }),
    }),
    reply: Type.Object({ revoked: Type.Boolean() }),
  },
  "keys.jwks": {
    summary: "The public keys that verify access tokens (served at /.well-known/jwks.json)",
    request: Type.Object({}),
    reply: Jwks,
  },
  "roles.grants": {
    summary: "A role's current permission keys (the gateway asks for host.api's, the API-key role)",
    request: Type.Object({ role: Type.String({ maxLength: 64 }) }),
    reply: Type.Object({ role: Type.String(), permissions: Type.Array(Type.String()) }),
  },
});

/** What rbac tells every replica. */
export const rbacBroadcasts = defineBroadcasts("rbac", {
  "roles.changed": {
    summary: "A role's grants changed: drop cached grants",
    payload: Type.Object({ role: Type.String() }),
  },
});
