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
export { type AccessClaims, TOKEN_AUDIENCE } from "./tokens.js";
export { openRevocationBucket, RevocationList, revocationBucketName } from "./revocation.js";
