/**
 * Whether an event's name belongs to who published it (its `Svc-Event-Source`), judged before it is
 * matched: the platform publishes only the catalogue's built-in events; a plugin only the `<pluginId>.`
 * events it declares, platform-wide or into a workspace whose chain holds it; a flow `flow.<name>` events,
 * or a plugin's events where its workspace may raise them. An event without a source header counts as its
 * name's plugin's (an external backend publishing with its own credentials). Bus permissions already keep
 * most of this; the dispatcher's check holds where they do not (a plugin backend chooses the workspace
 * header; a development bus has no permissions).
 */
import { EventSource } from "@svc/wire-contract";

import { mayPublish } from "./flows.js";
import type { PluginEventScopes } from "./plugin-contributions.js";

export type SourceVerdict =
  | { readonly ok: true }
  /** `mayBeStale`: a newer view of the installed plugins could admit it (installed or added just now). */
  | { readonly ok: false; readonly reason: string; readonly mayBeStale: boolean };

const OK: SourceVerdict = { ok: true };
const PLUGIN_PREFIX = EventSource.plugin("");
const FLOW_PREFIX = EventSource.flow("");

export class EventSources {
  constructor(
    /** The catalogue's built-in event names: the only ones the platform publishes. */
    private readonly platformEvents: ReadonlySet<string>,
    private readonly plugins: PluginEventScopes,
  ) {}

  judge(eventName: string, source: string | null, workspaceKey: string | null): SourceVerdict {
    if (source === EventSource.Platform) {
      return this.platformEvents.has(eventName)
        ? OK
        : { ok: false, reason: "the platform publishes only its own events", mayBeStale: false };
    }
    if (source?.startsWith(FLOW_PREFIX)) {
      // The rule flows are held to at create, replace and run.
      if (mayPublish(eventName, (name) => this.plugins.mayRaise(name, workspaceKey))) return OK;
      return {
        ok: false,
        reason: "a flow publishes flow.<name> events or a plugin's events its workspace may raise",
        mayBeStale: true,
      };
    }
    if (source !== null && !source.startsWith(PLUGIN_PREFIX)) {
      return { ok: false, reason: "the event source is not one the platform knows", mayBeStale: false };
    }
    const pluginId =
      source === null
        ? eventName.slice(0, Math.max(0, eventName.indexOf(".")))
        : source.slice(PLUGIN_PREFIX.length);
    if (
      pluginId !== "" &&
      eventName.startsWith(`${pluginId}.`) &&
      this.plugins.pluginOf(eventName) === pluginId &&
      this.plugins.mayRaise(eventName, workspaceKey)
    ) {
      return OK;
    }
    return {
      ok: false,
      reason:
        workspaceKey === null || this.plugins.pluginOf(eventName) !== pluginId
          ? "not an event the publishing plugin declares"
          : "the plugin is not in the workspace's chain",
      mayBeStale: true,
    };
  }

  /** Whether the view of the installed plugins was asked for before the event could have been seen. */
  olderThan(publishedAtMs: number): boolean {
    // Five seconds for clocks that differ between the NATS server and this process.
    return this.plugins.viewAt < publishedAtMs + 5_000;
  }
}
