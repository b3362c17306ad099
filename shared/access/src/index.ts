export { authorise, requestedWorkspaces } from "./guard.js";
export {
  CORE_PERMISSION_KEYS,
  type CorePermissionKey,
  filterWorkspaceKeys,
  hasPermission,
  isPlatformKey,
  PLATFORM_KEYS,
  SYSTEM_ROLES,
  SystemRole,
  WILDCARD,
} from "./permissions.js";
export {
  assertPlatform,
  assertReachesWorkspace,
  listWorkspace,
  type Reach,
  reachCondition,
  reachOf,
  reachWorkspace,
  requireReach,
} from "./reach.js";
export {
  openRevocationBucket,
  revocationBucketName,
  RevocationList,
  REVOCATIONS_COMPLETE_KEY,
} from "./revocation.js";
export { type AccessClaims, TOKEN_AUDIENCE } from "./tokens.js";
