/**
 * The route guard, one function for the gateway and for every service: the gateway runs it
 * before forwarding, and `serveRoute` runs it again in the owning service with the principal the request
 * carries, so a service enforces its own contract whoever sends it a request.
 */
import type { Principal } from "@svc/bus";
import { ErrorCode, ForbiddenError, NotFoundError, SvcError } from "@svc/errors";

import { hasPermission } from "./permissions.js";
import { reachOf, requireReach } from "./reach.js";

const INVALID = "\u0000invalid";

/**
 * Every workspace a request names: the `{workspaceKey}` path parameter and each `workspaceKey` query value
 * (a blank query value means `default`). A value that is not a string names no workspace the
 * caller could own.
 */
export function requestedWorkspaces(
  params: Record<string, unknown>,
  query: Record<string, unknown>,
): string[] {
  const named: string[] = [];
  const add = (value: unknown, isQuery: boolean) => {
    if (value === undefined) return;
    if (Array.isArray(value)) {
      for (const v of value) add(v, isQuery);
      return;
    }
    if (typeof value !== "string") named.push(INVALID);
    else named.push(isQuery && value.trim() === "" ? "default" : value);
  };
  add(params.workspaceKey, false);
  add(query.workspaceKey, true);
  return named;
}

/**
 * The guard, identical for every operator route and plugin route:
 * 1. reach first: a workspace session naming, in the path or in any `workspaceKey` query value, a workspace
 *    other than its own → 404 whatever keys it holds, as if the workspace did not exist (a 403 would tell it
 *    the workspace is there);
 * 2. the permission check (superadmin, or the key, or `*`) → 403 naming the key; a plugin route with an empty
 *    key is for any authenticated caller;
 * 3. platform-only routes (user writes, data export) → 403 for any session that is not platform-scoped;
 * 4. a session without a scope claim → 403 (the operator API needs one; it never gets platform reach),
 *    the same answer the services give (`requireReach` in @svc/access).
 */
export function authorise(
  principal: Principal,
  route: { readonly permission: string | readonly string[]; readonly platformOnly?: boolean },
  params: Record<string, unknown>,
  query: Record<string, unknown>,
): void {
  const keys: readonly string[] =
    typeof route.permission === "string" ? [route.permission] : route.permission;
  const first = keys[0] ?? "";
  const anyCaller = keys.length === 1 && first === "";
  const reach = reachOf(principal);
  if (reach.kind === "workspace") {
    for (const workspace of requestedWorkspaces(params, query)) {
      if (reach.workspaceKey !== workspace) {
        throw new NotFoundError(
          workspace === INVALID ? "Workspace not found." : `Workspace '${workspace}' was not found.`,
        );
      }
    }
  }
  const held = keys.find((key) => hasPermission(principal, key));
  if (!anyCaller && held === undefined) {
    if (keys.length === 1) throw new ForbiddenError(first);
    // Any one of several keys will do: the problem names each.
    throw new SvcError(
      ErrorCode.Forbidden,
      `One of the permissions ${keys.map((k) => `'${k}'`).join(", ")} is required.`,
      { extensions: { missingPermission: first, anyOf: [...keys] } },
    );
  }
  if (route.platformOnly && principal.scope !== "platform") {
    // The key is held: what is missing is the scope, and the problem says so without naming the key as
    // missing.
    const key = held ?? first;
    throw new SvcError(
      ErrorCode.Forbidden,
      `The permission '${key}' is only honoured for platform sessions.`,
      {
        extensions: { requiredScope: "platform", ...(held === undefined ? { missingPermission: key } : {}) },
      },
    );
  }
  requireReach(principal);
}
