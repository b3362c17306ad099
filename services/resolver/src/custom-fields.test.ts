/**
 * Custom fields through their contracts, with the plugins' definitions and the values in memory: no NATS,
 * no PostgreSQL. A PUT is checked against the definitions (known keys, each type, required fields set
 * once the change applies) and refused whole; a workspace session reaches only its own workspace's
 * fields; a value of a field no plugin defines any more is not shown.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, type PluginContribution, resolverRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { beforeEach, describe, expect, it } from "vitest";

import {
  CustomFieldCatalogue,
  definitions,
  type FieldValueTables,
  getValues,
  putValues,
} from "./custom-fields.js";

const field = (
  entityName: string,
  key: string,
  type: string,
  more: { required?: boolean; options?: string[] } = {},
) => ({
  entityName,
  key,
  label: key,
  type,
  required: more.required ?? false,
  options: more.options ?? [],
  description: null,
});

const contribution = (pluginId: string, customFields: PluginContribution["customFields"]) =>
  ({
    pluginId,
    version: "1.0.0",
    permissions: [],
    sensitiveFields: [],
    events: [],
    eventSchemas: [],
    state: "active",
    routes: [],
    workspaces: [],
    customFields,
  }) satisfies PluginContribution;

class MemoryValues implements FieldValueTables {
  readonly existing = new Set(["workspace/shop", "workspace/news", "tenant/acme"]);
  readonly stored = new Map<string, Record<string, string>>();

  async exists(entityName: string, entityId: string) {
    return !["workspace", "tenant"].includes(entityName) || this.existing.has(`${entityName}/${entityId}`);
  }
  async values(entityName: string, entityId: string) {
    return { ...this.stored.get(`${entityName}/${entityId}`) };
  }
  async save(
    entityName: string,
    entityId: string,
    set: ReadonlyArray<readonly [string, string]>,
    unset: readonly string[],
  ) {
    const values = { ...this.stored.get(`${entityName}/${entityId}`) };
    for (const k of unset) delete values[k];
    for (const [k, v] of set) values[k] = v;
    this.stored.set(`${entityName}/${entityId}`, values);
  }
}

const operator = caller(["customfield.read", "customfield.update", "workspace.read"]);
const shopAdmin: Principal = { ...operator, subject: "shop-admin", scope: "workspace", workspaceKey: "shop" };

let values: MemoryValues;
let catalogue: CustomFieldCatalogue;
const deps = () => ({ values, catalogue });
beforeEach(() => {
  values = new MemoryValues();
  catalogue = new CustomFieldCatalogue();
  catalogue.apply([
    contribution("crm", [
      field("workspace", "industry", "select", { options: ["retail", "media"], required: true }),
      field("workspace", "founded", "date"),
      field("crm.contact", "phone", "text"),
    ]),
    // A second plugin defining a key already defined on the entity: the first definition stays.
    contribution("other", [field("workspace", "founded", "number"), field("tenant", "vip", "boolean")]),
  ]);
});

const put = (
  entityName: string,
  entityId: string,
  body: Record<string, string | null>,
  principal = operator,
) =>
  callRoute(resolverRoutes["custom-fields.put"], (req) => putValues(deps(), req), {
    principal,
    params: { entityName, entityId },
    query: {},
    body: { values: body },
  });
const get = (entityName: string, entityId: string, principal = operator) =>
  callRoute(resolverRoutes["custom-fields.get"], (req) => getValues(deps(), req), {
    principal,
    params: { entityName, entityId },
    query: {},
    body: null,
  });

describe("custom field values", () => {
  it("stores values that fit their definitions and shows them with the fields", async () => {
    const answer = await put("workspace", "shop", { industry: "retail", founded: "2020-02-29" });
    expect(answer.body).toMatchObject({
      entityName: "workspace",
      entityId: "shop",
      values: { industry: "retail", founded: "2020-02-29" },
    });
    expect(answer.body?.fields.map((f) => `${f.key}:${f.type}:${f.pluginId}`)).toEqual([
      "industry:select:crm",
      "founded:date:crm",
    ]);
    expect((await put("crm.contact", "c-1", { phone: "+49 30 1234" })).body?.values).toEqual({
      phone: "+49 30 1234",
    });
  });

  it("refuses the whole change on any unknown key, wrong value or missing required field, writing nothing", async () => {
    await expect(
      put("workspace", "shop", { industry: "farming", founded: "yesterday", nope: "x" }),
    ).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
      violations: [
        { field: "/body/values/industry", message: "is not one of retail, media" },
        { field: "/body/values/founded", message: "is not a date (YYYY-MM-DD)" },
        { field: "/body/values/nope", message: "'workspace' has no custom field 'nope'" },
        { field: "/body/values/industry", message: "is required" },
      ],
    });
    await put("workspace", "shop", { industry: "media" });
    // Clearing a required field: refused, even alone.
    await expect(put("workspace", "shop", { industry: null })).rejects.toMatchObject({
      violations: [{ field: "/body/values/industry", message: "is required" }],
    });
    expect(values.stored.get("workspace/shop")).toEqual({ industry: "media" });
  });

  it("clears a value with null and hides a value whose field no plugin defines any more", async () => {
    await put("workspace", "shop", { industry: "media", founded: "2001-01-01" });
    expect((await put("workspace", "shop", { founded: null })).body?.values).toEqual({ industry: "media" });
    values.stored.set("workspace/shop", { industry: "media", retired: "old" });
    expect((await get("workspace", "shop")).body?.values).toEqual({ industry: "media" });
  });

  it("answers 404 for an entity with no fields, a workspace or tenant that does not exist, or one out of a workspace session's reach", async () => {
    await expect(get("user", "u-1")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(get("workspace", "ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(get("tenant", "ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect((await get("tenant", "acme")).status).toBe(200);
    expect((await put("workspace", "shop", { industry: "retail" }, shopAdmin)).status).toBe(200);
    for (const [entityName, entityId] of [
      ["workspace", "news"],
      ["tenant", "acme"],
      ["crm.contact", "c-1"],
    ] as const) {
      await expect(get(entityName, entityId, shopAdmin)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    }
    expect(values.stored.has("workspace/news")).toBe(false);
  });

  it("lists the definitions, all or one entity's", async () => {
    const list = async (entityName?: string) =>
      (
        await callRoute(resolverRoutes["custom-fields.definitions"], (req) => definitions(deps(), req), {
          principal: operator,
          params: {},
          query: entityName === undefined ? {} : { entityName },
          body: null,
        })
      ).body?.items.map((d) => `${d.entityName}.${d.key}`);
    expect(await list()).toEqual([
      "crm.contact.phone",
      "tenant.vip",
      "workspace.founded",
      "workspace.industry",
    ]);
    expect(await list("tenant")).toEqual(["tenant.vip"]);
  });
});
