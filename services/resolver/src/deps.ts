/** What the resolver's route handlers share, and their type from the route contracts. */
import type { PlatformEventData, resolverRoutes, RouteHandlerWith } from "@svc/contracts";
import type { Db } from "@svc/db";
import type { Logger } from "@svc/observability";
import type { Outbox } from "@svc/outbox";

export interface ResolverDeps {
  readonly db: Db;
  /** Workspace events are recorded with the change they describe, and relayed from there. */
  readonly outbox: Outbox<PlatformEventData>;
  readonly log: Logger;
}

type Routes = typeof resolverRoutes;
export type ResolverHandler<K extends keyof Routes> = RouteHandlerWith<ResolverDeps, Routes[K]>;
