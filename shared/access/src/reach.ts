/**
 * Reach: which workspaces a principal's requests may touch, decided by the caller's own
 * principal in every handler. A platform session reaches every workspace; a workspace session only its
 * own; a principal without a scope claim reaches none (no scope never means platform reach).
 *
 * One answer for a session without a scope, everywhere: 403 (the operator API needs a scope claim). The
 * gateway's guard gives it first; `requireReach` gives the same to any other caller.
 */
import type { Principal } from "@svc/bus";
import { type Sql, sql } from "@svc/db";
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

/** 404, as if the workspace did not exist, unless the principal reaches it; 403 without a scope. */
export function assertReachesWorkspace(principal: Principal, workspaceKey: string): void {
  requireReach(principal);
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

/** The principal's reach; 403 for a session without a scope, which reaches nothing. */
export function requireReach(principal: Principal): Exclude<Reach, { kind: "none" }> {
  const reach = reachOf(principal);
  if (reach.kind === "none") {
    throw new SvcError(ErrorCode.Forbidden, "The session has no scope claim, so it reaches nothing.", {
      extensions: { requiredScope: "platform or workspace" },
    });
  }
  return reach;
}

/**
 * The one workspace a session is limited to: its own for a workspace session, null (every workspace) for
 * a platform session; 403 without a scope. What a table port's `within` takes.
 */
export function reachWorkspace(principal: Principal): string | null {
  const reach = requireReach(principal);
  return reach.kind === "platform" ? null : reach.workspaceKey;
}

/**
 * A WHERE condition limiting rows to the principal's reach: TRUE for a platform session, `inWorkspace(key)`
 * for a workspace session; 403 without a scope.
 */
export function reachCondition(principal: Principal, inWorkspace: (workspaceKey: string) => Sql): Sql {
  const reach = requireReach(principal);
  return reach.kind === "platform" ? sql`TRUE` : inWorkspace(reach.workspaceKey);
}

/**
 * The workspace a list is limited to: for a platform session the one it asks for (undefined: all); for a
 * workspace session its own, and naming another is a 404 as if it did not exist; 403 without a scope.
 */
export function listWorkspace(principal: Principal, requested: string | undefined): string | undefined {
  const reach = requireReach(principal);
  if (reach.kind === "platform") return requested;
  if (requested !== undefined && requested !== reach.workspaceKey) {
    throw new NotFoundError(`Workspace '${requested}' was not found.`);
  }
  return reach.workspaceKey;
}
