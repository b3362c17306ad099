export {
  CORE_PERMISSION_KEYS,
  type CorePermissionKey,
  filterWorkspaceKeys,
  hasPermission,
  isCoreKey,
  SYSTEM_ROLES,
  SystemRole,
  WILDCARD,
} from "./permissions.js";
export { assertPlatform, assertReachesWorkspace, type Reach, reachesWorkspace, reachOf } from "./reach.js";
export { openRevocationBucket, revocationBucketName, RevocationList } from "./revocation.js";
export { type AccessClaims, TOKEN_AUDIENCE } from "./tokens.js";
