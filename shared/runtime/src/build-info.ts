/**
 * What this build is (the host version is fixed at build time). `make build` bakes the root
 * package.json's version, the commit and the build time into every bundle (esbuild's `define` of
 * `__SVC_BUILD_INFO__`, scripts/build.mjs); run from the sources (tests), the version is read from the
 * same package.json as the module loads (read, not imported: an import put the whole file, its scripts
 * and dependency lists, into every bundle) and the commit and build time are unknown. The container image
 * carries the same version as its `org.opencontainers.image.version` label (deploy/Dockerfile, `make image`).
 */
import { readFileSync } from "node:fs";

import { PLUGIN_CONTRACT_VERSION } from "@svc/plugin-sdk";

export interface BuildInfo {
  /** The host version (semver): what `dependencies.host` of a plugin is checked against. */
  readonly version: string;
  /** The git commit the bundle was built from; null when unknown or run from the sources. */
  readonly commit: string | null;
  /** When the bundle was built (ISO 8601); null when run from the sources. */
  readonly builtAt: string | null;
}

declare const __SVC_BUILD_INFO__: BuildInfo | undefined;

export const BUILD_INFO: BuildInfo = Object.freeze(
  typeof __SVC_BUILD_INFO__ === "object" && __SVC_BUILD_INFO__ !== null
    ? { ...__SVC_BUILD_INFO__ }
    : {
        version: (
          JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
            version: string;
          }
        ).version,
        commit: null,
        builtAt: null,
      },
);

/** The host version, fixed at build time. */
export const HOST_VERSION: string = BUILD_INFO.version;

/** What `GET /version` answers on every management listener. */
export function versionReport(service: string): Record<string, unknown> {
  return {
    service,
    version: BUILD_INFO.version,
    commit: BUILD_INFO.commit,
    builtAt: BUILD_INFO.builtAt,
    pluginContractVersion: PLUGIN_CONTRACT_VERSION,
    node: process.version,
  };
}
