/**
 * Least privilege on the bus: what each service may publish and subscribe to, in one
 * place, from which `make nats-auth` writes the NATS server's authorization; the bucket names here are the
 * ones the code opens.
 *
 * Derived, not copied: a service serves and replies on its own subjects (`<prefix>.<service>.>`, the
 * route, message and broadcast contracts' first token is the owner), broadcasts only its own
 * (`BROADCASTS`, every broadcast contract), listens to the broadcasts it follows, and
 * calls the services listed in `calls`. JetStream access is by resource: the events and diagnostics
 * streams, the KV buckets and the object stores each service reads or writes, with the JetStream API
 * subjects each needs; no service may delete or purge a stream.
 */
import { revocationBucketName } from "@svc/access";
import {
  type BroadcastContract,
  configMessages,
  type MessageContract,
  metricsMessages,
  pluginRegistryBroadcasts,
  rbacBroadcasts,
  resolverBroadcasts,
  type ServiceName,
} from "@svc/contracts";
import { mediaBucket } from "@svc/media";
import { assetBucket, MANIFEST_BUCKET, packageBucket } from "@svc/plugin-package/store";
import { eventsSubject, pluginHttpSubject } from "@svc/wire-contract";

import { diagnosticsBucket, diagnosticsStream, diagnosticsSubject } from "./diagnostics.js";
import { configBucket } from "./live-settings.js";
import { principalKeysBucket } from "./principal-assertions.js";

/** Where a service's replies arrive: an inbox prefix of its own (its NATS user may read no other). */
export const inboxPrefix = (service: string) => `_INBOX_${service}`;

/** The gateway's shared rate-limit counters. */
export const rateLimitBucket = (prefix: string) => `${prefix}_rate_limits`;
/** The gateway's Idempotency-Key claims. */
export const idempotencyBucket = (prefix: string) => `${prefix}_idempotency`;
/** The webhook dispatcher's receiver circuits. */
export const circuitBucket = (prefix: string) => `${prefix}_webhook_circuits`;
/** The webhook dispatcher's per-subscription throttle counters. */
export const throttleBucket = (prefix: string) => `${prefix}_webhook_throttles`;

/** Every broadcast, each under its owner's subjects. */
export const BROADCASTS: readonly BroadcastContract[] = [
  ...Object.values(rbacBroadcasts),
  ...Object.values(resolverBroadcasts),
  ...Object.values(pluginRegistryBroadcasts),
];

/**
 * Messages every service answers (not under an owner's name), with the one service that asks them: the
 * resolver gathers every service's settings, the gateway every service's metrics.
 */
export const FAN_OUT: ReadonlyArray<readonly [MessageContract, ServiceName]> = [
  [configMessages.describe, "resolver"],
  [configMessages.check, "resolver"],
  [metricsMessages.collect, "gateway"],
];

const { "roles.changed": rolesChanged } = rbacBroadcasts;
const { "cache.invalidate": resolverChanged } = resolverBroadcasts;
const { "contributions.changed": pluginsChanged } = pluginRegistryBroadcasts;

type Access = "read" | "write";

/** The shared JetStream resources, by kind (names under a prefix: see `resources`). */
type Bucket =
  | "revoked"
  | "rateLimits"
  | "idempotency"
  | "config"
  | "diagnostics"
  | "circuits"
  | "throttles"
  | "uiManifest"
  | "principalKeys";
type ObjectStore = "packages" | "pluginAssets" | "media";

export interface ServiceNeeds {
  /** Services whose subjects it sends requests to. */
  readonly calls: readonly (ServiceName | "plugins")[];
  /** Broadcasts it follows. */
  readonly listens: readonly BroadcastContract[];
  /** Whether it publishes events (outbox relay, its own events). */
  readonly publishesEvents: boolean;
  /** Whether it reads events with durable consumers. */
  readonly consumesEvents: boolean;
  readonly buckets: Partial<Record<Bucket, Access>>;
  readonly objects: Partial<Record<ObjectStore, Access>>;
  /** Runs the diagnostics recorder: reads the diagnostics stream and empties it when a recording starts. */
  readonly recordsDiagnostics?: boolean;
}

const ALL_SERVICES: readonly ServiceName[] = [
  "gateway",
  "rbac",
  "resolver",
  "plugin-registry",
  "webhook-dispatcher",
  "job-reaper",
];

/** What each service needs on the bus. */
export const SERVICE_NEEDS: Readonly<Record<ServiceName, ServiceNeeds>> = {
  gateway: {
    // The front door: every service's routes, the plugins' routes, and `<service>.metrics` of each.
    calls: [...ALL_SERVICES.filter((s) => s !== "gateway"), "plugins"],
    listens: [rolesChanged, resolverChanged, pluginsChanged],
    publishesEvents: false,
    consumesEvents: false,
    buckets: {
      revoked: "read",
      rateLimits: "write",
      idempotency: "write",
      config: "read",
      diagnostics: "read",
      uiManifest: "read",
      principalKeys: "write",
    },
    objects: { packages: "write", media: "write", pluginAssets: "read" },
  },
  rbac: {
    calls: ["resolver", "plugin-registry"],
    listens: [pluginsChanged],
    publishesEvents: true,
    consumesEvents: true,
    buckets: { revoked: "write", config: "read", diagnostics: "read", principalKeys: "read" },
    objects: {},
  },
  resolver: {
    calls: ["plugin-registry"],
    listens: [pluginsChanged],
    publishesEvents: true,
    consumesEvents: false,
    buckets: { config: "write", diagnostics: "read", principalKeys: "read" },
    objects: { media: "write" },
  },
  "plugin-registry": {
    calls: ["resolver"],
    listens: [pluginsChanged, resolverChanged],
    publishesEvents: true,
    consumesEvents: true,
    buckets: { config: "read", diagnostics: "read", uiManifest: "write", principalKeys: "read" },
    objects: { packages: "write", pluginAssets: "write" },
  },
  "webhook-dispatcher": {
    calls: ["resolver", "plugin-registry"],
    listens: [pluginsChanged, resolverChanged],
    publishesEvents: true,
    consumesEvents: true,
    buckets: {
      circuits: "write",
      throttles: "write",
      config: "read",
      diagnostics: "read",
      principalKeys: "read",
    },
    objects: {},
  },
  "job-reaper": {
    calls: [],
    listens: [],
    publishesEvents: true,
    consumesEvents: false,
    buckets: { config: "read", diagnostics: "write", principalKeys: "read" },
    objects: {},
    recordsDiagnostics: true,
  },
};

export interface NatsNames {
  /** SVC_SUBJECT_PREFIX. */
  readonly prefix: string;
  /** SVC_EVENTS_STREAM. */
  readonly eventsStream: string;
}

/** The KV bucket and object store names of a prefix: the functions the code that opens them uses. */
export function resources(prefix: string) {
  return {
    buckets: {
      revoked: revocationBucketName(prefix),
      rateLimits: rateLimitBucket(prefix),
      idempotency: idempotencyBucket(prefix),
      config: configBucket(prefix),
      diagnostics: diagnosticsBucket(prefix),
      circuits: circuitBucket(prefix),
      throttles: throttleBucket(prefix),
      uiManifest: MANIFEST_BUCKET(prefix),
      principalKeys: principalKeysBucket(prefix),
    } satisfies Record<Bucket, string>,
    objects: {
      packages: packageBucket(prefix),
      pluginAssets: assetBucket(prefix),
      media: mediaBucket(prefix),
    } satisfies Record<ObjectStore, string>,
    diagnosticsStream: diagnosticsStream(prefix),
  };
}

/** The JetStream streams behind what a service keeps: the events stream, its buckets and object stores. */
export function storageOf(service: ServiceName, names: NatsNames): string[] {
  const needs = SERVICE_NEEDS[service];
  const r = resources(names.prefix);
  return [
    names.eventsStream,
    ...(Object.keys(needs.buckets) as Bucket[]).map((kind) => `KV_${r.buckets[kind]}`),
    ...(Object.keys(needs.objects) as ObjectStore[]).map((kind) => `OBJ_${r.objects[kind]}`),
    ...(needs.recordsDiagnostics === true ? [r.diagnosticsStream] : []),
  ];
}

export interface SubjectPermissions {
  readonly publish: { readonly allow: string[]; readonly deny: string[] };
  readonly subscribe: { readonly allow: string[]; readonly deny: string[] };
  /** Replies to the requests it received (request/reply). */
  readonly allowResponses: boolean;
}

/** The JetStream API subjects that name a stream, whatever the verb (`$JS.API.STREAM.INFO.S`, …). */
function streamApi(stream: string): string[] {
  return [
    `$JS.API.*.*.${stream}`,
    `$JS.API.*.*.${stream}.>`,
    `$JS.API.*.*.*.${stream}`,
    `$JS.API.*.*.*.${stream}.>`,
    `$JS.ACK.${stream}.>`,
    `$JS.FC.${stream}.>`,
  ];
}

/** A service's NATS permissions, from its needs. */
export function servicePermissions(service: ServiceName, names: NatsNames): SubjectPermissions {
  const needs = SERVICE_NEEDS[service];
  const p = names.prefix;
  const r = resources(p);
  // Replies come to the service's own inbox prefix: no other user reads them (a sign-in's reply holds a
  // token). Replies it sends go where requests ask (allow_responses), never to any inbox at will.
  const publish = new Set<string>(["$JS.API.INFO"]);
  const subscribe = new Set<string>([`${inboxPrefix(service)}.>`, `${p}.${service}.>`, "$SRV.>"]);
  for (const target of needs.calls) publish.add(`${p}.${target}.>`);
  // Its own broadcasts (under its own subjects) and its own ping and metrics replies.
  publish.add(`${p}.${service}.>`);
  for (const b of needs.listens) subscribe.add(`${p}.${b.subject}`);
  for (const [message, asker] of FAN_OUT) {
    subscribe.add(`${p}.${message.subject}`);
    if (asker === service) publish.add(`${p}.${message.subject}`);
  }
  // The events stream: every service makes sure it exists at start.
  for (const s of streamApi(names.eventsStream)) publish.add(s);
  if (needs.publishesEvents) publish.add(`${p}.events.>`);
  // Every service records diagnostics when a recording runs, and reads its state.
  publish.add(diagnosticsSubject(p));
  for (const s of streamApi(r.diagnosticsStream)) publish.add(s);
  for (const [kind, access] of Object.entries(needs.buckets) as Array<[Bucket, Access]>) {
    const bucket = r.buckets[kind];
    for (const s of streamApi(`KV_${bucket}`)) publish.add(s);
    if (access === "write") publish.add(`$KV.${bucket}.>`);
  }
  for (const [kind, access] of Object.entries(needs.objects) as Array<[ObjectStore, Access]>) {
    const store = r.objects[kind];
    for (const s of streamApi(`OBJ_${store}`)) publish.add(s);
    if (access === "write") publish.add(`$O.${store}.>`);
  }
  // No one forges another service's broadcast, deletes a stream, or purges one: not the events, not a
  // bucket (the revocations), not an object store it does not write (deleting an object purges its
  // chunks, so a writer may purge its own store; the recorder empties the diagnostics stream).
  const foreignBroadcasts = BROADCASTS.filter((b) => b.service !== service).map((b) => `${p}.${b.subject}`);
  const unpurgeable = [
    names.eventsStream,
    ...(needs.recordsDiagnostics === true ? [] : [r.diagnosticsStream]),
    ...Object.values(r.buckets).map((b) => `KV_${b}`),
    ...(Object.entries(r.objects) as Array<[ObjectStore, string]>)
      .filter(([kind]) => needs.objects[kind] !== "write")
      .map(([, store]) => `OBJ_${store}`),
  ].map((stream) => `$JS.API.STREAM.PURGE.${stream}`);
  return {
    publish: {
      allow: [...publish].sort(),
      deny: [...foreignBroadcasts, "$JS.API.STREAM.DELETE.>", ...unpurgeable].sort(),
    },
    subscribe: { allow: [...subscribe].sort(), deny: [] },
    allowResponses: true,
  };
}

/**
 * Where a plugin's replies arrive (a JetStream publish's acknowledgement): an inbox prefix of its own. Plugin
 * ids hold no dot, so no plugin's prefix lies inside another's.
 */
export const pluginInboxPrefix = (pluginId: string) => `_INBOX_plugin_${pluginId}`;
/** The inbox prefix of the one user all plugins share in the static model. */
export const SHARED_PLUGIN_INBOX = "_INBOX_plugins";

/**
 * What one plugin may do on the bus: take requests on its own route subject (in its queue
 * group) and answer them, and publish the events its registry.json declares, each by its exact subject (a
 * JetStream publish, acknowledged to its own inbox). Nothing else: no other subject, no bucket, no stream
 * API. The registry mints a user with these for each activation, and for an external backend on request.
 */
export function pluginPermissions(
  pluginId: string,
  events: readonly string[],
  names: Pick<NatsNames, "prefix">,
): SubjectPermissions {
  const allow = [...new Set(events)].map((e) => eventsSubject(names.prefix, e)).sort();
  return {
    // An empty allow list means no limit to nats-server: a plugin that declares no event is denied all.
    publish: allow.length > 0 ? { allow, deny: [] } : { allow: [], deny: [">"] },
    subscribe: {
      allow: [pluginHttpSubject(names.prefix, pluginId), `${pluginInboxPrefix(pluginId)}.>`],
      deny: [],
    },
    allowResponses: true,
  };
}

/**
 * The one user every plugin process shares in the static model (no per-plugin minting): it may take
 * requests on any plugin's route subject and answer them, and publish nothing (in-process plugins publish
 * through the host, which checks the names; an external backend that publishes needs the decentralized
 * model's credentials of its own). A plugin can therefore answer another plugin's routes: the static model
 * separates plugins from the platform, not plugins from each other.
 */
export function sharedPluginPermissions(names: Pick<NatsNames, "prefix">): SubjectPermissions {
  return {
    publish: { allow: [], deny: [">"] },
    subscribe: { allow: [pluginHttpSubject(names.prefix, "*"), `${SHARED_PLUGIN_INBOX}.>`], deny: [] },
    allowResponses: true,
  };
}

/** A list in nats-server's configuration syntax. */
const list = (items: readonly string[]) => `[${items.map((s) => JSON.stringify(s)).join(", ")}]`;

/**
 * The `authorization` block of a nats-server configuration: one user per service, known by its nkey's
 * public key, with the service's permissions (the static model; the seeds stay with the services).
 */
export function staticAuthorization(
  names: NatsNames,
  publicKeys: Readonly<Record<ServiceName | "plugins", string>>,
): string {
  const user = (name: string, p: SubjectPermissions) =>
    [
      `    # ${name}`,
      `    {`,
      `      nkey: ${publicKeys[name as ServiceName | "plugins"]}`,
      `      permissions: {`,
      `        publish: { allow: ${list(p.publish.allow)}, deny: ${list(p.publish.deny)} }`,
      `        subscribe: { allow: ${list(p.subscribe.allow)} }`,
      `        allow_responses: ${p.allowResponses}`,
      `      }`,
      `    }`,
    ].join("\n");
  const users = [
    ...(Object.keys(SERVICE_NEEDS) as ServiceName[]).map((s) => user(s, servicePermissions(s, names))),
    // Every plugin process (the registry's NATS_PLUGIN_NKEY_SEED_FILE): their routes only.
    user("plugins", sharedPluginPermissions(names)),
  ];
  return [
    `# Generated by make nats-auth for subject prefix '${names.prefix}' and events stream '${names.eventsStream}'.`,
    "# One user per service: each may publish and subscribe only where it must;",
    "# one user for the plugin processes: plugin route subjects only.",
    "authorization {",
    "  users = [",
    ...users,
    "  ]",
    "}",
    "",
  ].join("\n");
}

/** The same permissions in a user JWT's form (the decentralized model). */
export function userPermissions(p: SubjectPermissions) {
  return {
    pub: { allow: p.publish.allow, deny: p.publish.deny },
    sub: { allow: p.subscribe.allow, deny: p.subscribe.deny },
    // One reply per request received, within no time limit: allow_responses' default.
    ...(p.allowResponses ? { resp: { max: 1, ttl: 0 } } : {}),
  };
}
