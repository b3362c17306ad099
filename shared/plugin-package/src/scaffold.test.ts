import { createPrivateKey, createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { describe, expect, it } from "vitest";

import { DEV_SIGNER_PEM } from "./dev.js";
import { validateRegistry } from "./registry.js";
import { pluginIdFor, scaffoldFiles } from "./scaffold.js";

const examples = new URL("../../../examples/plugins/", import.meta.url);

describe("svc-plugin dev's signer", () => {
  it("is the development signer whose public half make dev trusts", () => {
    expect(DEV_SIGNER_PEM).toBe(readFileSync(fileURLToPath(new URL("dev-signer.pem", examples)), "utf8"));
    const published = readFileSync(fileURLToPath(new URL("dev-signer.pub.pem", examples)), "utf8");
    expect(createPublicKey(createPrivateKey(DEV_SIGNER_PEM)).export({ type: "spki", format: "pem" })).toBe(
      published,
    );
  });
});

describe("svc-plugin init's plugin", () => {
  it("takes its id from the directory's name, made into one", () => {
    expect(pluginIdFor("/tmp/Notes Board")).toBe("notes-board");
    expect(pluginIdFor("./2nd_try")).toBe("nd-try");
    expect(pluginIdFor("my-plugin/")).toBe("my-plugin");
  });

  it("keeps every install rule of registry.json, for both backends", () => {
    for (const runtime of ["worker", "external"] as const) {
      const files = scaffoldFiles("notes-board", runtime);
      const registry = JSON.parse(files["registry.json"] as string) as {
        assemblyFileName: string;
        uiAssets: { entries: Array<{ path: string }>; styles: Array<{ path: string }> };
      };
      expect(validateRegistry(registry, {}), runtime).toEqual([]);
      // Every file registry.json and theme.json name is written.
      const theme = JSON.parse(files["theme.json"] as string) as {
        definitions: Array<{ templatePath: string }>;
      };
      for (const path of [
        registry.assemblyFileName,
        ...registry.uiAssets.entries.map((e) => e.path),
        ...registry.uiAssets.styles.map((e) => e.path),
        ...theme.definitions.map((d) => d.templatePath),
      ]) {
        expect(Object.keys(files), `${runtime}: ${path}`).toContain(path);
      }
    }
  });
});
