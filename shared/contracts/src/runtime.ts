/**
 * The messages every service answers through the runtime, whatever it owns: its ping, and the fan-out
 * requests every replica answers (its settings for `GET /api/config`, a check of proposed values, its
 * metrics for the gateway's `/metrics`).
 */
import { type Static, Type } from "@sinclair/typebox";

import { defineMessages } from "./messages.js";
import type { ServiceName } from "./services.js";

const Empty = Type.Object({});

export const PingReply = Type.Object({
  service: Type.String(),
  /** This replica's id. */
  instance: Type.String(),
  /** The host version it was built as. */
  version: Type.String(),
  uptimeMs: Type.Number(),
});
export type PingReply = Static<typeof PingReply>;

/** `<service>.ping`: any replica of the service answers with its identity (the last handler it serves). */
export function pingMessages<const N extends ServiceName>(service: N) {
  return defineMessages(service, {
    ping: {
      summary: "A replica's identity, once every handler is in place",
      request: Empty,
      reply: PingReply,
    },
  });
}

/** One setting as a replica holds it. */
export const SettingDescription = Type.Object({
  variable: Type.String(),
  owner: Type.String(),
  type: Type.String(),
  defaultText: Type.String(),
  doc: Type.String(),
  changeable: Type.Boolean(),
  secret: Type.Boolean(),
  /** The value in force, as text; null for a secret or an unset value. */
  value: Type.Union([Type.String(), Type.Null()]),
  source: Type.Union([Type.Literal("default"), Type.Literal("environment"), Type.Literal("stored")]),
});
export type SettingDescription = Static<typeof SettingDescription>;

/** Answered by every replica of every service (fan-out). */
export const configMessages = defineMessages("config", {
  describe: {
    summary: "The settings a replica declares, their values and sources",
    request: Empty,
    reply: Type.Object({ service: Type.String(), settings: Type.Array(SettingDescription) }),
    fanOut: true,
  },
  check: {
    summary: "Which of the proposed values a replica owns, and what is wrong with them",
    request: Type.Object({
      values: Type.Record(Type.String(), Type.Union([Type.String({ maxLength: 65_536 }), Type.Null()])),
    }),
    reply: Type.Object({
      service: Type.String(),
      owned: Type.Array(Type.String()),
      problems: Type.Array(Type.Object({ variable: Type.String(), message: Type.String() })),
    }),
    fanOut: true,
  },
});

/** Answered by every replica of every service but the gateway (which is scraped directly). */
export const metricsMessages = defineMessages("metrics", {
  collect: {
    summary: "A replica's metrics, as prom-client's getMetricsAsJSON()",
    request: Empty,
    reply: Type.Object({
      service: Type.String(),
      instance: Type.String(),
      metrics: Type.Array(Type.Unknown()),
    }),
    fanOut: true,
  },
});
export type MetricsReply = Static<(typeof metricsMessages)["collect"]["reply"]>;
