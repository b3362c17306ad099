export { BUILD_INFO, type BuildInfo, HOST_VERSION } from "./build-info.js";
export {
  diagnosticsBucket,
  diagnosticsStream,
  diagnosticsSubject,
  inlineValues,
  literal,
  readRecording,
  type RecordedEntry,
  RECORDING_KEY,
  type RecordingKind,
  type RecordingState,
} from "./diagnostics.js";
export { growingLru, type GrowingLruOptions } from "./growing-lru.js";
export { startHousekeeping } from "./housekeeping.js";
export { KeyedOutcomes, type KeyedWritesMode } from "./keyed-writes.js";
export { configBucket, LiveSettings } from "./live-settings.js";
export { checkReadiness, type Phase } from "./management.js";
export {
  BROADCASTS,
  circuitBucket,
  FAN_OUT,
  idempotencyBucket,
  inboxPrefix,
  type NatsNames,
  pluginInboxPrefix,
  pluginPermissions,
  rateLimitBucket,
  resources,
  SERVICE_NEEDS,
  type ServiceNeeds,
  servicePermissions,
  SHARED_PLUGIN_INBOX,
  sharedPluginPermissions,
  staticAuthorization,
  type SubjectPermissions,
  throttleBucket,
  userPermissions,
} from "./nats-permissions.js";
export {
  GatewayPrincipalSigner,
  PrincipalAssertionVerifier,
  principalKeysBucket,
} from "./principal-assertions.js";
export {
  defineService,
  natsAuthOf,
  type RunningService,
  runServiceMain,
  type ServiceDefinition,
  type ServiceDeps,
  type ServiceHooks,
  type ServiceImplementation,
  type ServiceSpec,
  type StartOptions,
  startService,
} from "./service.js";
export { type StorageCopies, StorageWatch } from "./storage-watch.js";
