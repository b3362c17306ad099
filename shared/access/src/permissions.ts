/**
 * The core permission-key catalogue, the system roles, and the one permission check that the gateway's
 * guard and plugin routes share (superadmin short-circuit, else a `permission` claim equal to the key
 * or `*`).
 */
import type { Principal } from "@svc/bus";

export const CORE_PERMISSION_KEYS = [
  "tenant.create",
  "tenant.read",
  "tenant.update",
  "tenant.delete",
  "plugin.create",
  "plugin.read",
  "plugin.delete",
  "plugin.execute",
  "plugin.assign",
  "config.read",
  "config.update",
  "webhook.read",
  "webhook.manage",
  "notification.read",
  "media.read",
  "media.manage",
  "customfield.read",
  "customfield.update",
  "flow.read",
  "flow.manage",
  "job.read",
  "job.execute",
  "diagnostics.record",
  "extension.read",
  "extension.update",
  "role.read",
  "role.update",
  "user.create",
  "user.read",
  "user.update",
  "user.delete",
  "membership.read",
  "membership.update",
  "membership.delete",
  "workspace.create",
  "workspace.read",
  "workspace.update",
  "workspace.delete",
  "integration.read",
  "integration.manage",
  "snippet.read",
  "snippet.update",
] as const;
export type CorePermissionKey = (typeof CORE_PERMISSION_KEYS)[number];

export const WILDCARD = "*";

export const SystemRole = {
  SuperAdmin: "superadmin",
  Admin: "admin",
  HostApi: "host.api",
} as const;
export type SystemRole = (typeof SystemRole)[keyof typeof SystemRole];

/** The seeded system roles and their grants. */
export const SYSTEM_ROLES: ReadonlyArray<{
  name: SystemRole;
  scope: "platform" | "workspace";
  permissions: readonly string[];
  description: string;
}> = [
  {
    name: SystemRole.SuperAdmin,
    scope: "platform",
    permissions: [WILDCARD],
    description: "Passes every permission check.",
  },
  {
    name: SystemRole.Admin,
    scope: "workspace",
    permissions: ["membership.read", "membership.update", "membership.delete", "user.read"],
    description: "Workspace administrator; rights come per workspace through membership.",
  },
  {
    name: SystemRole.HostApi,
    scope: "platform",
    permissions: [],
    description: "API-key host access: scope, not authority.",
  },
];

/**
 * The one table of platform keys: keys honoured only for platform sessions.
 * Workspace sign-in drops them from member-role keys (with `*`), and every route whose keys are all
 * platform keys is platform-only (`defineRoutes` in @svc/contracts derives its flag from here), so a
 * workspace token carries only keys some route accepts from it (test/contracts.test.ts checks both
 * ways). They act on the platform as a whole: tenants, installing, removing, activating or deactivating
 * plugins, global users, global roles and their assignments, platform configuration (reading it too),
 * integrations, diagnostics, creating and deleting workspaces.
 */
export const PLATFORM_KEYS: ReadonlySet<string> = new Set([
  "tenant.create",
  "tenant.read",
  "tenant.update",
  "tenant.delete",
  "plugin.create",
  "plugin.delete",
  "user.create",
  "user.update",
  "user.delete",
  "role.read",
  "role.update",
  "plugin.execute",
  "config.read",
  "config.update",
  "integration.manage",
  "diagnostics.record",
  "workspace.create",
  "workspace.delete",
]);

/** A key honoured only for platform sessions (the table above). */
export function isPlatformKey(key: string): boolean {
  return PLATFORM_KEYS.has(key);
}

export function isCoreKey(key: string): key is CorePermissionKey {
  return (CORE_PERMISSION_KEYS as readonly string[]).includes(key);
}

/**
 * Filters a workspace session's member-role keys: core keys only if a workspace
 * administrator could hold them; plugin keys only for plugins activated in that workspace, and only inside
 * the plugin's own namespace; `*` never.
 */
export function filterWorkspaceKeys(keys: Iterable<string>, activePluginIds: ReadonlySet<string>): string[] {
  const kept = new Set<string>();
  for (const key of keys) {
    if (key === WILDCARD) continue;
    if (isCoreKey(key)) {
      if (!PLATFORM_KEYS.has(key)) kept.add(key);
      continue;
    }
    const pluginId = [...activePluginIds].find((id) => key.startsWith(`${id}.`));
    if (pluginId !== undefined) kept.add(key);
  }
  return [...kept].sort();
}

/** The permission check, identical for every route and for plugin routes. */
export function hasPermission(principal: Principal, key: string): boolean {
  if (principal.roles.includes(SystemRole.SuperAdmin)) return true;
  return principal.permissions.includes(key) || principal.permissions.includes(WILDCARD);
}
