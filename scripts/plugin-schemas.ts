/**
 * `make plugin-schemas`: writes the JSON Schemas of registry.json, theme.json and plugin.signature.json
 * (from @svc/plugin-package) to docs/schemas/, where editors find them. `--check` exits 1 when a file is
 * out of date (test/plugins.test.ts checks the same).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { pluginSchemas } from "@svc/plugin-package";
import { format } from "prettier";

import { repoRoot } from "./lib/stack.js";

const dir = join(repoRoot, "docs", "schemas");
const check = process.argv.includes("--check");
let stale = 0;
mkdirSync(dir, { recursive: true });
for (const [file, schema] of Object.entries(pluginSchemas())) {
  // Formatted as the repository's Prettier check expects.
  const text = await format(JSON.stringify(schema), { parser: "json", filepath: file });
  const path = join(dir, file);
  const before = (() => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return "";
    }
  })();
  if (JSON.stringify(JSON.parse(before || "null")) === JSON.stringify(schema)) continue;
  if (check) {
    process.stderr.write(`docs/schemas/${file} is out of date (run make plugin-schemas)\n`);
    stale++;
  } else {
    writeFileSync(path, text);
    process.stdout.write(`docs/schemas/${file} written\n`);
  }
}
process.exit(stale > 0 ? 1 : 0);
