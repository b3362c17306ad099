/**
 * Plugin capabilities (`capabilities` provided, `requiresCapabilities` required): a plugin that
 * requires a capability no active plugin provides is not activated (422 naming it); once a provider is
 * active it is; and the provider cannot be deactivated while an active plugin needs a capability only it
 * provides (409 naming the plugins to deactivate first).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, installPackage } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-capabilities-"));
const signer = fixtureSigner();
let base: string;
let operator: string;
const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

beforeAll(async () => {
  const env = pluginStackEnv(work, { tests: signer });
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(pluginRegistryService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});
afterAll(async () => {
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

async function install(pluginId: string, extra: Record<string, unknown>): Promise<void> {
  const bytes = await codePlugin(work, signer, pluginId, "export class Plugin {}\n", [], extra);
  const installed = await installPackage(base, operator, bytes);
  expect(installed.status, installed.text).toBe(201);
}

describe("requiresCapabilities", () => {
  it("refuses activation without a provider, allows it with one, and keeps the provider while needed", async () => {
    await install("maps-user", { requiresCapabilities: ["maps.render"] });
    await install("maps-provider", { capabilities: ["maps.render"] });

    const refused = await asOperator("POST", "/api/plugins/maps-user/activate");
    expect(refused.status).toBe(422);
    expect(refused.json()).toMatchObject({ reason: "missing-capability", capability: "maps.render" });

    expect((await asOperator("POST", "/api/plugins/maps-provider/activate")).status).toBe(200);
    expect((await asOperator("POST", "/api/plugins/maps-user/activate")).status).toBe(200);

    const needed = await asOperator("POST", "/api/plugins/maps-provider/deactivate");
    expect(needed.status).toBe(409);
    expect(needed.json()).toMatchObject({ rule: "capability-in-use", dependents: ["maps-user"] });

    // Deactivated in order, both go.
    expect((await asOperator("POST", "/api/plugins/maps-user/deactivate")).status).toBe(200);
    expect((await asOperator("POST", "/api/plugins/maps-provider/deactivate")).status).toBe(200);
  });
});
