export {
  Bus,
  type BusOptions,
  encodeJson,
  type Handler,
  type HandlerContext,
  type RequestOptions,
  type ServeOptions,
} from "./bus.js";
export { coalesce } from "./coalesce.js";
export { connectNats, type ConnectOptions, isNatsConnected, natsIsReachable } from "./connect.js";
export {
  createEventPublisher,
  EVENT_NAME_PATTERN,
  type EventPublisher,
  type PublishedEvent,
} from "./events.js";
export { Header } from "./headers.js";
export { ensureBucket, followKv } from "./kv.js";
export { EndpointStats, MicroHeader, type MicroIdentity, MicroService } from "./micro.js";
export { Provisioner, type ProvisionStep } from "./provision.js";
export { ensureEventsStream, type EventsStreamOptions, eventsSubject } from "./streams.js";
export {
  type Broadcast,
  type BroadcastMap,
  type Principal,
  type ReplyOf,
  type RequestOf,
  type RouteReply,
  type RouteRequest,
  Scope,
  type Subject,
  type SubjectMap,
} from "./subjects.js";
