export { archiveKind, extractArchive } from "./archive.js";
export { DEFAULT_LIMITS, hashDirectory, PackageError, type PackageLimits } from "./files.js";
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
  type TrustedSigner,
  type VerificationFailure,
  type VerificationResult,
  type VerifyOptions,
  verifyPackage,
} from "./verify.js";
