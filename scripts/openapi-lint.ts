/**
 * `make openapi-lint`: the operator API's OpenAPI description, as the gateway serves it at /openapi.json
 * (built from the route contracts by the same function), checked by the two linters platform teams run:
 * Redocly's `recommended` rules (redocly.yaml) and Spectral's `spectral:oas` ruleset (.spectral.yaml), both
 * pinned devDependencies. Any error or warning of either fails (exit 1), each printed with its rule and
 * where it is. `--out <file>` also writes the document there; `--file <file>` lints that document instead.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { OPERATOR_ROUTES } from "@svc/contracts";

import { buildOpenApi } from "../services/gateway/src/routes/openapi.js";
import { repoRoot } from "./lib/stack.js";

const option = (name: string) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
};
const dir = mkdtempSync(join(tmpdir(), "svc-openapi-"));
const given = option("--file");
const file = given ?? join(dir, "openapi.json");
if (given === undefined) {
  const document = `${JSON.stringify(buildOpenApi(OPERATOR_ROUTES), null, 2)}\n`;
  writeFileSync(file, document);
  const out = option("--out");
  if (out !== undefined) writeFileSync(out, document);
}

// No telemetry, no update check: CI and developers' machines reach only the package registry.
const env = {
  ...process.env,
  REDOCLY_TELEMETRY: "off",
  REDOCLY_SUPPRESS_UPDATE_NOTICE: "true",
  SCARF_ANALYTICS: "false",
};
const bin = (name: string) => join(repoRoot, "node_modules", ".bin", name);

function run(command: string, args: string[]): string {
  const result = spawnSync(command, args, { cwd: repoRoot, env, encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error) throw result.error;
  return result.stdout;
}

interface RedoclyReport {
  totals: { errors: number; warnings: number };
  problems: Array<{
    ruleId: string;
    severity: string;
    message: string;
    location?: Array<{ pointer?: string }>;
  }>;
}
interface SpectralResult {
  code: string;
  severity: number;
  message: string;
  path: string[];
}

let failed = 0;
try {
  const redocly = JSON.parse(
    run(bin("redocly"), ["lint", file, "--config", join(repoRoot, "redocly.yaml"), "--format", "json"]),
  ) as RedoclyReport;
  for (const p of redocly.problems) {
    console.log(`redocly ${p.severity} ${p.ruleId}: ${p.message} (${p.location?.[0]?.pointer ?? "#"})`);
  }
  console.log(
    `redocly lint (recommended): ${redocly.totals.errors} errors, ${redocly.totals.warnings} warnings`,
  );
  failed += redocly.totals.errors + redocly.totals.warnings;

  const spectral = JSON.parse(
    run(bin("spectral"), [
      "lint",
      file,
      "--ruleset",
      join(repoRoot, ".spectral.yaml"),
      "--format",
      "json",
      "--fail-severity",
      "hint",
      "--quiet",
    ]) || "[]",
  ) as SpectralResult[];
  const SEVERITY = ["error", "warning", "info", "hint"];
  for (const r of spectral) {
    console.log(
      `spectral ${SEVERITY[r.severity] ?? r.severity} ${r.code}: ${r.message} (#/${r.path.join("/")})`,
    );
  }
  const errors = spectral.filter((r) => r.severity === 0).length;
  console.log(`spectral lint (spectral:oas): ${errors} errors, ${spectral.length - errors} warnings`);
  failed += spectral.length;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed === 0 ? 0 : 1);
