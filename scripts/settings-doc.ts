/**
 * `make settings-doc`: the settings reference, derived from the settings tables (the platform's in
 * @svc/config, each service's in services/<name>/src/settings.ts), written between the
 * `<!-- settings:... -->` markers of the README (short) and the operator guide (full). `--check` only
 * compares and exits 1 when a document is out of date (test/settings.test.ts does the same).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import * as prettier from "prettier";

import { normaliseTables, settingsDocuments } from "./lib/settings-doc.js";
import { repoRoot } from "./lib/stack.js";

const check = process.argv.includes("--check");
let stale = 0;
for (const { file, content } of settingsDocuments()) {
  const path = join(repoRoot, file);
  const before = readFileSync(path, "utf8");
  const after = await prettier.format(content(before), { filepath: path });
  if (normaliseTables(after) === normaliseTables(before)) continue;
  if (check) {
    process.stderr.write(`${file}: the settings table is out of date (run make settings-doc)\n`);
    stale++;
  } else {
    writeFileSync(path, after);
    process.stdout.write(`${file}: settings table written\n`);
  }
}
process.exit(stale > 0 ? 1 : 0);
