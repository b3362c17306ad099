export {
  Bus,
  type BusOptions,
  encodeJson,
  type Handler,
  type HandlerContext,
  type RequestOptions,
  type ServeOptions,
} from "./bus.js";
export { connectNats, type ConnectOptions, natsIsReachable } from "./connect.js";
export { Header } from "./headers.js";
export { ensureEventsStream, type EventsStreamOptions, eventsSubject } from "./streams.js";
export {
  type Broadcast,
  type BroadcastMap,
  type JobsListQuery,
  type JobsListReply,
  type MetricsReply,
  ownerOf,
  type PingReply,
  type Principal,
  type ReplyOf,
  type RequestOf,
  type ResolveRequest,
  type ResolveResult,
  Scope,
  ServiceName,
  type Subject,
  type SubjectMap,
} from "./subjects.js";
