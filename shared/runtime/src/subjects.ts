/** The subjects every service answers, declared into the bus's map: its ping and metrics.collect. */
import type { ServiceName } from "@svc/contracts";
import type { PingReply as WirePingReply } from "@svc/wire-contract";

import type { SettingDescription } from "./live-settings.js";

/** What one replica of a service says about itself (the wire contract's ping, with the service named). */
export interface PingReply extends WirePingReply {
  readonly service: ServiceName;
}

/** One replica's metrics, as prom-client's `getMetricsAsJSON()`. */
export interface MetricsReply {
  readonly service: string;
  readonly instance: string;
  readonly metrics: readonly unknown[];
}

/** `<service>.ping`: any replica of the service answers with its identity. */
type PingSubjects = {
  [N in ServiceName as `${N}.ping`]: { request: Record<string, never>; reply: PingReply };
};

declare module "@svc/bus" {
  interface SubjectMap extends PingSubjects {
    /** Every replica of every service answers (fan-out): its settings, values and their sources. */
    "config.describe": {
      request: Record<string, never>;
      reply: { service: string; settings: SettingDescription[] };
    };
    /** Every replica answers for the settings it declares: which of these it owns, and their problems. */
    "config.check": {
      request: { values: Record<string, string | null> };
      reply: { service: string; owned: string[]; problems: Array<{ variable: string; message: string }> };
    };
    /** Every replica of every service answers (fan-out, no queue group): the gateway's /metrics gathers them. */
    "metrics.collect": { request: Record<string, never>; reply: MetricsReply };
  }
}
