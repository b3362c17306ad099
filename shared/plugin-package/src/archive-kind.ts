/**
 * An archive's kind from its first bytes. A module of its own, without the archive libraries: the gateway
 * asks it of every upload and never unpacks one, so it does not load node-tar and yauzl (the package is
 * marked free of side effects, so the bundler leaves out the modules whose exports a service does not use).
 */
const ZIP = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
/** A gzip stream's first two bytes. */
export const GZIP = Buffer.from([0x1f, 0x8b]);

/** The archive's kind from its first bytes, or undefined when it is none we read. */
export function archiveKind(bytes: Buffer): "zip" | "tar" | undefined {
  if (bytes.subarray(0, 4).equals(ZIP)) return "zip";
  if (bytes.subarray(0, 2).equals(GZIP)) return "tar";
  if (bytes.length >= 262 && bytes.subarray(257, 262).toString("latin1") === "ustar") return "tar";
  return undefined;
}
