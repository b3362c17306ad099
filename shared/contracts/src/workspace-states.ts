/**
 * Operators' decisions stick: a workspace session of a workspace an operator turned off,
 * or of a workspace whose tenant is suspended, is refused on every request, whatever its token says (the
 * gateway's authenticator), and its deliveries and flow runs wait (the dispatcher defers them). The
 * state comes from the resolver (`resolver.tenancy.lookup`), cached per workspace for a few seconds and
 * dropped on every `resolver.cache.invalidate` broadcast (the resolver sends one for each change to a
 * tenant or a workspace), so a deactivation applies within the broadcast's delay.
 *
 * While the resolver cannot be asked, the last known state applies; a workspace never seen is let through
 * (its requests fail at the owning services, which need the resolver too). A workspace the resolver does
 * not know is not refused here: its handlers answer 404.
 */
import type { Bus, Principal } from "@svc/bus";
import { ErrorCode, SvcError } from "@svc/errors";
import type { Logger } from "@svc/observability";

import { type MessageClient, messageClient, onBroadcast } from "./messages.js";
import { resolverBroadcasts, resolverMessages, type TenancyLookupReply } from "./resolver.js";

export type WorkspaceState = "active" | "inactive" | "suspended" | "unknown";
type State = WorkspaceState;

interface Entry {
  readonly state: State;
  readonly atMs: number;
}

/** A workspace's state from the resolver's tenancy lookup (undefined: the resolver does not know it). */
export function workspaceStateOf(w: TenancyLookupReply["workspaces"][number] | undefined): WorkspaceState {
  if (w === undefined) return "unknown";
  if (!w.tenantIsActive) return "suspended";
  return w.isActive ? "active" : "inactive";
}

/** The 403 problem for a turned-off workspace or a suspended tenant: sign-in and every request alike. */
export function refuseClosedWorkspace(key: string, state: WorkspaceState): void {
  if (state === "inactive") {
    throw new SvcError(
      ErrorCode.Forbidden,
      `Workspace '${key}' was deactivated by an operator: its sign-ins and sessions are refused until it is turned on again.`,
      { extensions: { rule: "workspace-inactive" } },
    );
  }
  if (state === "suspended") {
    throw new SvcError(
      ErrorCode.Forbidden,
      `The tenant of workspace '${key}' is suspended: its sign-ins and sessions are refused until it is resumed.`,
      { extensions: { rule: "tenant-suspended" } },
    );
  }
}

export class WorkspaceStates {
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Map<string, Promise<State>>();
  /** Advanced by every invalidation: a lookup that straddles one is not cached. */
  private generation = 0;

  private readonly resolver: MessageClient<typeof resolverMessages>;

  constructor(
    bus: Bus,
    private readonly log: Logger,
    private readonly ttlMs = 5_000,
  ) {
    this.resolver = messageClient(bus, resolverMessages);
    onBroadcast(bus, resolverBroadcasts["cache.invalidate"], () => {
      this.entries.clear();
      this.generation++;
    });
  }

  /** Throws a 403 problem when the principal's workspace is off or its tenant suspended. */
  async check(principal: Principal): Promise<void> {
    if (principal.scope !== "workspace" || principal.workspaceKey === null) return;
    refuseClosedWorkspace(principal.workspaceKey, await this.state(principal.workspaceKey));
  }

  /** The workspace's state (cached); `unknown` for a workspace the resolver does not know. */
  async state(key: string): Promise<State> {
    const cached = this.entries.get(key);
    if (cached !== undefined && Date.now() - cached.atMs < this.ttlMs) return cached.state;
    let lookup = this.pending.get(key);
    if (lookup === undefined) {
      const generation = this.generation;
      lookup = this.lookUp(key, cached?.state ?? "unknown")
        .then((state) => {
          if (generation === this.generation) this.entries.set(key, { state, atMs: Date.now() });
          return state;
        })
        .finally(() => this.pending.delete(key));
      this.pending.set(key, lookup);
    }
    return lookup;
  }

  private async lookUp(key: string, lastKnown: State): Promise<State> {
    try {
      const found = await this.resolver.request(
        "tenancy.lookup",
        { workspaceKeys: [key], tenantKeys: [] },
        { timeoutMs: 2_000 },
      );
      return workspaceStateOf(found.workspaces[0]);
    } catch (error) {
      this.log.warn({ err: error, workspaceKey: key }, "workspace state unavailable: the last known applies");
      return lastKnown;
    }
  }
}
