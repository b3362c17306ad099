export {
  Bus,
  type BusOptions,
  encodeJson,
  type Handler,
  type HandlerContext,
  headerReader,
  type KeyedWrites,
  type PrincipalSigner,
  type PrincipalVerifier,
  type RequestOptions,
  type ServeOptions,
  type WithheldReply,
  withheldReply,
} from "./bus.js";
export { coalesce } from "./coalesce.js";
export {
  connectNats,
  type ConnectOptions,
  isNatsAuthError,
  isNatsConnected,
  type NatsAuth,
  natsAuthOptions,
  natsIsReachable,
  parseCreds,
} from "./connect.js";
export {
  consumeWatched,
  ensureDurable,
  isMissingConsumer,
  PULL_EXPIRES_MS,
  PULL_HEARTBEAT_MS,
} from "./consume.js";
export {
  createEventPublisher,
  type EventPublisher,
  type PublishedEvent,
  type PublishOptions,
} from "./events.js";
export {
  type FollowedEvent,
  type FollowedEvents,
  followEvents,
  type FollowEventsOptions,
} from "./follow-events.js";
export { ensureBucket, followKv, KvWatches } from "./kv.js";
export { EndpointStats, MicroHeader, type MicroIdentity, MicroService } from "./micro.js";
export { nativeCreatePair, nativeCreateUser, nativeFromSeed, type NativeKeyPair } from "./native-nkeys.js";
export { BlobStore, lazily } from "./objects.js";
export { isJetStreamAway, patiently, Provisioner, type ProvisionStep } from "./provision.js";
export { ensureEventsStream, type EventsStreamOptions, isStreamNotFound, keepReplicas } from "./streams.js";
// The wire contract's (docs/wire-contract.md) headers, event names, subjects and the envelope of operator
// routes (principal, request, reply): any NATS client sends and receives the same shapes.
export {
  EVENT_NAME_PATTERN,
  EventSource,
  eventsSubject,
  Header,
  type Principal,
  type RouteReply,
  type RouteRequest,
  Scope,
} from "@svc/wire-contract";
