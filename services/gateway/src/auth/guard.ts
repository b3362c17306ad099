import { hasPermission } from "@svc/access";
import type { Principal } from "@svc/bus";
import { ErrorCode, ForbiddenError, NotFoundError, SvcError } from "@svc/errors";

import type { OperatorRoute } from "../routes/catalogue.js";

/** Spec 2.1.4: where a `workspaceKey` query parameter is accepted, a blank value means `default`. */
export function requestedWorkspace(
  params: Record<string, unknown>,
  query: Record<string, unknown>,
): string | undefined {
  if (typeof params.workspaceKey === "string") return params.workspaceKey;
  if (typeof query.workspaceKey === "string")
    return query.workspaceKey.trim() === "" ? "default" : query.workspaceKey;
  return undefined;
}

/**
 * The guard, identical for every operator route (and, later, plugin routes):
 * 1. the permission check of spec 5.3 (superadmin, or the key, or `*`) → 403 naming the key;
 * 2. platform-only routes (user writes, data export) → 403 for any session that is not platform-scoped;
 * 3. reach: a session that is not platform-scoped naming a workspace other than its own → 404, as if the
 *    workspace did not exist (a session without a scope reaches no workspace at all).
 */
export function authorise(
  principal: Principal,
  route: Pick<OperatorRoute, "permission" | "platformOnly">,
  params: Record<string, unknown>,
  query: Record<string, unknown>,
): void {
  const keys = typeof route.permission === "string" ? [route.permission] : route.permission;
  if (!keys.some((key) => hasPermission(principal, key))) throw new ForbiddenError(keys[0]);
  if (route.platformOnly && principal.scope !== "platform") {
    throw new SvcError(
      ErrorCode.Forbidden,
      `The permission '${keys[0]}' is only honoured for platform sessions.`,
      {
        extensions: { missingPermission: keys[0], requiredScope: "platform" },
      },
    );
  }
  const workspace = requestedWorkspace(params, query);
  if (workspace !== undefined && principal.scope !== "platform") {
    if (principal.scope !== "workspace" || principal.workspaceKey !== workspace) {
      throw new NotFoundError(`Workspace '${workspace}' was not found.`);
    }
  }
}
