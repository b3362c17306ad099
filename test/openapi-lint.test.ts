/**
 * The OpenAPI description passes the linters platform teams run on it, Redocly's
 * `recommended` rules and Spectral's `spectral:oas`, with no error and no warning (`make openapi-lint`,
 * also in .ci/run); and the gate fails when the description loses what those rules ask for.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { OPERATOR_ROUTES } from "@svc/contracts";
import { afterAll, describe, expect, it } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
import { buildOpenApi } from "../services/gateway/src/routes/openapi.js";

const dir = mkdtempSync(join(tmpdir(), "svc-openapi-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function lint(...args: string[]) {
  const result = spawnSync(process.execPath, ["--import", "tsx", "scripts/openapi-lint.ts", ...args], {
    cwd: repoRoot,
    encoding: "utf8",
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe("the OpenAPI description under Redocly and Spectral", () => {
  it("has no error and no warning under either", () => {
    const out = join(dir, "openapi.json");
    const { status, output } = lint("--out", out);
    expect(output).toContain("redocly lint (recommended): 0 errors, 0 warnings");
    expect(output).toContain("spectral lint (spectral:oas): 0 errors, 0 warnings");
    expect(status).toBe(0);
    const doc = JSON.parse(readFileSync(out, "utf8")) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).length).toBeGreaterThan(50);
  }, 60_000);

  it("fails, naming the rules, when an operation has no tag or the licence is missing", () => {
    // The document the gateway serves (the test above lints it as it is), built here by the same function.
    const doc = JSON.parse(JSON.stringify(buildOpenApi(OPERATOR_ROUTES))) as {
      info: { license?: unknown };
      paths: Record<string, Record<string, { tags?: string[]; description?: string }>>;
    };
    expect(doc.info.license).toBeDefined();
    delete doc.info.license;
    const users = doc.paths["/api/users"]?.get;
    expect(users).toBeDefined();
    delete users?.tags;
    delete users?.description;
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify(doc));
    const { status, output } = lint("--file", bad);
    expect(status).toBe(1);
    expect(output).toMatch(/redocly \w+ info-license/);
    expect(output).toMatch(/spectral warning operation-tags: .*#\/paths\/\/api\/users\/get/);
    expect(output).toMatch(/spectral warning operation-description/);
  }, 60_000);
});
