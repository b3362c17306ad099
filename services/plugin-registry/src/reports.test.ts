/**
 * Whether an installed plugin can run on this host: its contract within the major version the host
 * supports, and the host's version within the range the plugin asks for (pre-releases included), with
 * each reason it cannot.
 */
import { HOST_DEPENDENCY, PLUGIN_CONTRACT } from "@svc/plugin-package";
import { describe, expect, it } from "vitest";

import { compatibilityOf } from "./reports.js";

const major = Number(PLUGIN_CONTRACT.current.split(".")[0]);
const plugin = (contractVersion: string, host?: string) => ({
  plugin_id: "shop",
  version: "1.2.0",
  contract_version: contractVersion,
  registry: {
    contractVersion,
    schemaVersion: "1",
    name: "shop",
    pluginId: "shop",
    version: "1.2.0",
    assemblyFileName: "index.mjs",
    entryTypeName: "default",
    ...(host === undefined ? {} : { dependencies: { [HOST_DEPENDENCY]: host } }),
  },
});

describe("contract compatibility", () => {
  it("accepts a contract of the supported major version and a host range this host is in", () => {
    expect(compatibilityOf(plugin(`${major}.0`, `^2.0.0`), "2.3.1")).toEqual({
      pluginId: "shop",
      version: "1.2.0",
      contractVersion: `${major}.0`,
      compatible: true,
      reasons: [],
    });
    // A pre-release host is inside a range that covers its version.
    expect(compatibilityOf(plugin(`${major}.1`, ">=2.0.0"), "2.4.0-rc.1").compatible).toBe(true);
  });

  it("names each reason a plugin cannot run: another contract major, a host outside its range", () => {
    expect(compatibilityOf(plugin(`${major + 1}.0`, "^3.0.0"), "2.3.1").reasons).toEqual([
      `contract ${major + 1}.0 is outside ${PLUGIN_CONTRACT.supported}`,
      "needs host ^3.0.0; this host is 2.3.1",
    ]);
    expect(compatibilityOf(plugin("not-a-version"), "2.3.1")).toMatchObject({ compatible: false });
  });
});
