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
export { openRevocationBucket, revocationBucketName, RevocationList } from "./revocation.js";
export { type AccessClaims, TOKEN_AUDIENCE } from "./tokens.js";
