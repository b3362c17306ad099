/**
 * "Adding a service" (docs/architecture.md) names every list a service must join. The compiler checks the
 * ones typed by `ServiceName` (its NATS permissions, `SERVICE_NEEDS`); this checks the rest, so a service
 * left out of one fails here, not in a deployment that never starts it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { SERVICE_CONTRACTS, ServiceName } from "@svc/contracts";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";

import { ALL_SERVICE_SETTINGS } from "../scripts/lib/service-settings.js";
import { repoRoot, SERVICES } from "../scripts/lib/stack.js";
import { ALL_SERVICES } from "./support/all-services.js";

const names = Object.values(ServiceName).sort();
const sorted = (list: readonly string[]) => [...list].sort();

describe("every service is in every list a service must join", () => {
  it("the contracts the gateway forwards, and the services the harness starts, each with its own contract", () => {
    expect(sorted(SERVICE_CONTRACTS.map((c) => c.name))).toEqual(names);
    expect(sorted(ALL_SERVICES.map((s) => s.name))).toEqual(names);
    for (const service of ALL_SERVICES) expect(service.contract.name).toBe(service.name);
  });

  it("the settings reference holds each service's own settings", () => {
    for (const service of ALL_SERVICES) expect(ALL_SERVICE_SETTINGS).toContain(service.settings);
    expect(ALL_SERVICE_SETTINGS).toHaveLength(names.length);
  });

  it("make dev starts it, the build bundles it, the chart deploys it", () => {
    expect(sorted(SERVICES)).toEqual(names);
    const build = readFileSync(join(repoRoot, "scripts", "build.mjs"), "utf8");
    const bundled = /const services = \[([^\]]*)\]/.exec(build)?.[1] ?? "";
    expect(sorted([...bundled.matchAll(/"([a-z-]+)"/g)].map((m) => m[1] as string))).toEqual(names);
    const values = parseYaml(
      readFileSync(join(repoRoot, "deploy", "helm", "svc", "values.yaml"), "utf8"),
    ) as {
      services: Record<string, unknown>;
    };
    expect(sorted(Object.keys(values.services))).toEqual(names);
  });
});
