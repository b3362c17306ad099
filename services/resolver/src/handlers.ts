import type { ResolveRequest, ResolveResult } from "@svc/contracts";
import type { Queries } from "@svc/db";
import { ValidationError } from "@svc/errors";
import { MAX_HOST_LENGTH, MAX_PATH_LENGTH, normaliseHost, normalisePath } from "@svc/workspace";

import { findVisibleWorkspace } from "./repository.js";

const UNRESOLVED: ResolveResult = Object.freeze({ resolved: false, workspaceKey: null });

/** Checks the shape of a resolve request arriving over NATS (any client can send one). */
export function decodeResolveRequest(payload: unknown): ResolveRequest {
  const p = payload as Partial<Record<keyof ResolveRequest, unknown>>;
  const violations = [];
  if (typeof p?.host !== "string" || p.host.length > MAX_HOST_LENGTH) {
    violations.push({ field: "/host", message: `must be a string of at most ${MAX_HOST_LENGTH} characters` });
  }
  if (typeof p?.path !== "string" || p.path.length > MAX_PATH_LENGTH) {
    violations.push({ field: "/path", message: `must be a string of at most ${MAX_PATH_LENGTH} characters` });
  }
  if (violations.length > 0) throw new ValidationError(violations);
  return { host: p.host as string, path: p.path as string };
}

/** Spec 4.1 `GET /workspace/public/resolve`: never fails for an unknown host, it answers unresolved. */
export async function resolveWorkspace(
  db: Queries,
  defaultTenantKey: string | null,
  request: ResolveRequest,
): Promise<ResolveResult> {
  const host = normaliseHost(request.host);
  if (host === null) return UNRESOLVED;
  const key = await findVisibleWorkspace(db, host, normalisePath(request.path), defaultTenantKey);
  return key === null ? UNRESOLVED : { resolved: true, workspaceKey: key };
}
