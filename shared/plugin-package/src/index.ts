export { extractArchive, packageRoot, packDirectory } from "./archive.js";
export { archiveKind } from "./archive-kind.js";
export {
  DEFAULT_LIMITS,
  hashDirectory,
  listPackageFiles,
  PackageError,
  type PackageLimits,
} from "./files.js";
export {
  ALGORITHM,
  assertP256,
  canonicalBytes,
  type FileEntry,
  fingerprintOf,
  KeyError,
  SIGNATURE_FILE,
  SIGNATURE_SCHEMA_VERSION,
  type SignatureManifest,
  signManifest,
  verifyManifestSignature,
} from "./manifest.js";
export {
  contributedKeys,
  HOST_DEPENDENCY,
  PERMISSIONS_PROPERTY,
  PLUGIN_CONTRACT,
  PLUGIN_ID_PATTERN,
  type RegistryContext,
  type RegistryJson,
  RegistryJsonSchema,
  type RegistryViolation,
  RESERVED_NAMESPACES,
  validateRegistry,
} from "./registry.js";
export { pluginSchemas, SignatureManifestSchema, ThemeJsonSchema } from "./schemas.js";
export {
  checkValue,
  parseTheme,
  serialiseValue,
  type Theme,
  type ThemeDefinition,
  ThemeError,
  type ThemeField,
} from "./theme.js";
export {
  type TrustedSigner,
  type VerificationFailure,
  type VerificationResult,
  type VerifyOptions,
  verifyPackage,
} from "./verify.js";
