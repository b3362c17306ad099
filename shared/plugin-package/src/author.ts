/**
 * A package directory's registry.json, read and checked as the host checks it at install, for the commands
 * that work on a directory (validate, sign, pack, dev).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";

import { PackageError } from "./files.js";
import { validateRegistry } from "./registry.js";

export interface RegistryFound {
  readonly pluginId: string;
  readonly version: string;
  readonly raw: unknown;
}

export async function registryOf(dir: string): Promise<RegistryFound> {
  const text = await readFile(join(dir, "registry.json"), "utf8").catch(() => {
    throw new PackageError(`'${dir}' has no readable registry.json.`);
  });
  let registry: { pluginId?: unknown; version?: unknown };
  try {
    registry = JSON.parse(text) as typeof registry;
  } catch {
    throw new PackageError("registry.json is not valid JSON.", "registry.json");
  }
  if (typeof registry.pluginId !== "string" || typeof registry.version !== "string") {
    throw new PackageError("registry.json needs pluginId and version strings.", "registry.json");
  }
  return { pluginId: registry.pluginId, version: registry.version, raw: registry };
}

/**
 * registry.json checked as the host checks it at install, but for what depends on the host (its version,
 * the plugins installed there): a PackageError listing every rule broken.
 */
export function checkRules(raw: unknown): void {
  // One line per field: the schema may say twice what is wrong with one (missing, then not a string).
  const violations = validateRegistry(raw, {}).filter(
    (v, i, all) => all.findIndex((w) => w.field === v.field) === i,
  );
  if (violations.length > 0) {
    throw new PackageError(
      `registry.json breaks ${violations.length} rule${violations.length === 1 ? "" : "s"}:\n${violations
        .map((v) => `  ${v.field.replace(/^\/registry\.json\/?/, "") || "(root)"}: ${v.message}`)
        .join("\n")}`,
      "registry.json",
    );
  }
}

/** The directory's registry.json, read and checked (checkRules). */
export async function validated(dir: string): Promise<RegistryFound> {
  const found = await registryOf(dir);
  checkRules(found.raw);
  return found;
}
