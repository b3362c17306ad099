/**
 * Custom fields. A plugin defines them (registry.json customFields) on platform entities
 * and on its own; the definitions reach the resolver through the registry's contributions; values are
 * checked by type, options and required; a workspace session reaches only its workspace's fields.
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
import { eventually } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-fields-"));
const signer = fixtureSigner();
let base: string;
let operator: string;

const env = pluginStackEnv(work, { tests: signer });

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

const FIELDS = [
  { entityName: "workspace", key: "costCentre", label: "Cost centre", type: "text", required: true },
  { entityName: "workspace", key: "tier", type: "select", options: ["gold", "silver"] },
  { entityName: "workspace", key: "seats", type: "number" },
  { entityName: "tenant", key: "billingEmail", type: "email" },
  { entityName: "crm.contact", key: "since", type: "date" },
];

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(pluginRegistryService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  await asOperator("POST", "/api/tenants", { tenantKey: "cf", name: "Fields" });
  await asOperator("PUT", "/api/workspaces/cf-ws", { tenantKey: "cf", name: "Fields workspace" });
  const bytes = await codePlugin(work, signer, "crm", "export class Plugin {}\n", [], {
    customFields: FIELDS,
  });
  expect((await installPackage(base, operator, bytes)).status).toBe(201);
});

afterAll(async () => {
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

describe("custom fields", () => {
  it("lists the definitions installed plugins bring", async () => {
    const defs = await eventually(
      () => asOperator("GET", "/api/custom-fields/definitions"),
      (r) => r.json<{ items: unknown[] }>().items.length === FIELDS.length,
    );
    expect(
      defs.json<{ items: Array<{ entityName: string; key: string; pluginId: string }> }>().items,
    ).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          entityName: "workspace",
          key: "costCentre",
          label: "Cost centre",
          required: true,
          pluginId: "crm",
        }),
        expect.objectContaining({ entityName: "crm.contact", key: "since", type: "date" }),
      ]),
    );
    expect(
      (await asOperator("GET", "/api/custom-fields/definitions?entityName=tenant")).json<{
        items: unknown[];
      }>().items,
    ).toHaveLength(1);
  });

  it("checks values by type, options and required, and keeps them", async () => {
    const bad = await asOperator("PUT", "/api/custom-fields/workspace/cf-ws", {
      values: { tier: "bronze", seats: "many", nope: "x" },
    });
    expect(bad.status).toBe(400);
    expect(
      bad
        .json<{ errors: Array<{ field: string }> }>()
        .errors.map((e) => e.field)
        .sort(),
    ).toEqual(["/body/values/costCentre", "/body/values/nope", "/body/values/seats", "/body/values/tier"]);
    const good = await asOperator("PUT", "/api/custom-fields/workspace/cf-ws", {
      values: { costCentre: "CC-42", tier: "gold", seats: 12 },
    });
    expect(good.status, good.text).toBe(200);
    expect(good.json()).toMatchObject({
      entityName: "workspace",
      entityId: "cf-ws",
      values: { costCentre: "CC-42", tier: "gold", seats: "12" },
    });
    // A required field cannot be removed; another can.
    expect(
      (await asOperator("PUT", "/api/custom-fields/workspace/cf-ws", { values: { costCentre: null } }))
        .status,
    ).toBe(400);
    const removed = await asOperator("PUT", "/api/custom-fields/workspace/cf-ws", {
      values: { seats: null },
    });
    expect(removed.json<{ values: Record<string, string> }>().values).toEqual({
      costCentre: "CC-42",
      tier: "gold",
    });
    // A plugin's own entity, and a tenant.
    expect(
      (await asOperator("PUT", "/api/custom-fields/crm.contact/c-1", { values: { since: "2024-02-30x" } }))
        .status,
    ).toBe(400);
    expect(
      (
        await asOperator("PUT", "/api/custom-fields/crm.contact/c-1", { values: { since: "2024-02-03" } })
      ).json(),
    ).toMatchObject({ values: { since: "2024-02-03" } });
    expect((await asOperator("GET", "/api/custom-fields/tenant/nobody")).status).toBe(404);
    expect((await asOperator("GET", "/api/custom-fields/user/u1")).status).toBe(404); // no user fields defined
  });

  it("lets a workspace session reach only its own workspace's fields", async () => {
    const member = await mintToken({
      scope: "workspace",
      workspaceKey: "cf-ws",
      permissions: ["customfield.read", "customfield.update"],
    });
    expect((await api("GET", "/api/custom-fields/workspace/cf-ws", member)).status).toBe(200);
    expect((await api("GET", "/api/custom-fields/tenant/cf", member)).status).toBe(404);
    expect((await api("GET", "/api/custom-fields/crm.contact/c-1", member)).status).toBe(404);
  });

  it("refuses a plugin defining fields on another plugin's entities", async () => {
    const bytes = await codePlugin(work, signer, "sneaky", "export class Plugin {}\n", [], {
      customFields: [{ entityName: "crm.contact", key: "x" }],
    });
    const refused = await installPackage(base, operator, bytes);
    expect(refused.status).toBe(422);
    expect(refused.json()).toMatchObject({ reason: "registry-invalid" });
  });
});
