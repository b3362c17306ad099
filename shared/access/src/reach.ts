/**
 * Reach (spec 5.2): which workspaces a principal's requests may touch, decided by the caller's own
 * principal in every handler. A platform session reaches every workspace; a workspace session only its
 * own; a principal without a scope claim reaches none (5.2.4: no scope never means platform reach).
 */
import type { Principal } from "@svc/bus";
import { ErrorCode, NotFoundError, SvcError } from "@svc/errors";

export type Reach =
  | { readonly kind: "platform" }
  | { readonly kind: "workspace"; readonly workspaceKey: string }
  | { readonly kind: "none" };

export function reachOf(principal: Principal): Reach {
  if (principal.scope === "platform") return { kind: "platform" };
  if (principal.scope === "workspace" && principal.workspaceKey !== null && principal.workspaceKey !== "") {
    return { kind: "workspace", workspaceKey: principal.workspaceKey };
  }
  return { kind: "none" };
}

export function reachesWorkspace(principal: Principal, workspaceKey: string): boolean {
  const reach = reachOf(principal);
  return reach.kind === "platform" || (reach.kind === "workspace" && reach.workspaceKey === workspaceKey);
}

/** 404, as if the workspace did not exist, unless the principal reaches it. */
export function assertReachesWorkspace(principal: Principal, workspaceKey: string): void {
  if (!reachesWorkspace(principal, workspaceKey)) {
    throw new NotFoundError(`Workspace '${workspaceKey}' was not found.`);
  }
}

/** 403 unless the principal is a platform session: for operations on the platform as a whole. */
export function assertPlatform(principal: Principal, permission: string): void {
  if (reachOf(principal).kind !== "platform") {
    throw new SvcError(
      ErrorCode.Forbidden,
      `The permission '${permission}' is only honoured for platform sessions.`,
      { extensions: { missingPermission: permission, requiredScope: "platform" } },
    );
  }
}
