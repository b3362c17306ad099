/**
 * Custom fields. Installed plugins define them per entity type (registry.json
 * `customFields`: on `user`, `workspace`, `tenant`, or an entity of their own such as `crm.contact`); the
 * resolver follows the registry's contributions for the definitions and keeps the values. A PUT is checked
 * against the definitions: known keys, each value by its type (text, number, boolean, select among its
 * options, url, color, date, email), and every required field set afterwards. A workspace or tenant must
 * exist; a workspace session reaches only its own workspace's fields (other entities: 404).
 *
 * The routes ask a `FieldValueTables` port (`fieldValueTables` is the PostgreSQL one), so their rules are
 * unit-tested with the values in memory; a PUT's changes are written in one transaction.
 */
import { requireReach } from "@svc/access";
import type { Principal } from "@svc/bus";
import type { PluginContribution, resolverRoutes, RouteHandlerWith } from "@svc/contracts";
import { type Db, sql } from "@svc/db";
import { NotFoundError, ValidationError } from "@svc/errors";
import { checkValue, serialiseValue } from "@svc/plugin-package";

import { keyExists } from "./repository.js";

export interface FieldDefinition {
  readonly entityName: string;
  readonly key: string;
  readonly label: string;
  readonly type: string;
  readonly required: boolean;
  readonly options: string[];
  readonly description: string | null;
  readonly pluginId: string;
}

/** The definitions of the installed plugins, kept current by the contributions follower. */
export class CustomFieldCatalogue {
  private byEntity = new Map<string, FieldDefinition[]>();

  apply(plugins: readonly PluginContribution[]): void {
    const next = new Map<string, FieldDefinition[]>();
    for (const p of plugins) {
      for (const f of p.customFields ?? []) {
        const list = next.get(f.entityName) ?? [];
        if (!list.some((d) => d.key === f.key))
          list.push({ ...f, options: [...f.options], pluginId: p.pluginId });
        next.set(f.entityName, list);
      }
    }
    this.byEntity = next;
  }

  of(entityName: string): FieldDefinition[] {
    return this.byEntity.get(entityName) ?? [];
  }

  all(): FieldDefinition[] {
    return [...this.byEntity.values()]
      .flat()
      .sort((a, b) => a.entityName.localeCompare(b.entityName) || a.key.localeCompare(b.key));
  }
}

/** The custom field values' tables. */
export interface FieldValueTables {
  /** Whether the workspace or tenant exists (other entities are the plugins' own: true). */
  exists(entityName: string, entityId: string): Promise<boolean>;
  /** The entity's stored values by key. */
  values(entityName: string, entityId: string): Promise<Record<string, string>>;
  /** Sets and clears values, in one change. */
  save(
    entityName: string,
    entityId: string,
    set: ReadonlyArray<readonly [string, string]>,
    unset: readonly string[],
    by: string,
  ): Promise<void>;
}

/** The PostgreSQL custom field values. */
export function fieldValueTables(db: Db): FieldValueTables {
  return {
    async exists(entityName, entityId) {
      return entityName === "workspace" || entityName === "tenant"
        ? keyExists(db, entityName, entityId)
        : true;
    },
    async values(entityName, entityId) {
      const rows = await db.any<{ key: string; value: string }>(sql`
        SELECT key, value FROM resolver.custom_field_values WHERE entity_name = ${entityName} AND entity_id = ${entityId}`);
      return Object.fromEntries(rows.map((r) => [r.key, r.value]));
    },
    save: (entityName, entityId, set, unset, by) =>
      db.transaction(async (tx) => {
        if (unset.length > 0) {
          await tx.query(sql`
            DELETE FROM resolver.custom_field_values
            WHERE entity_name = ${entityName} AND entity_id = ${entityId} AND key = ANY(${unset}::text[])`);
        }
        if (set.length > 0) {
          await tx.query(sql`
            INSERT INTO resolver.custom_field_values (entity_name, entity_id, key, value, updated_by)
            SELECT ${entityName}, ${entityId}, k, v, ${by}
            FROM unnest(${set.map((x) => x[0])}::text[], ${set.map((x) => x[1])}::text[]) AS t(k, v)
            ON CONFLICT (entity_name, entity_id, key) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, updated_at = now()`);
        }
      }),
  };
}

export interface CustomFieldDeps {
  readonly values: FieldValueTables;
  readonly catalogue: CustomFieldCatalogue;
}

type Handler<K extends keyof typeof resolverRoutes> = RouteHandlerWith<
  CustomFieldDeps,
  (typeof resolverRoutes)[K]
>;

export const definitions: Handler<"custom-fields.definitions"> = async (deps, req) => ({
  status: 200,
  body: {
    items:
      req.query.entityName === undefined ? deps.catalogue.all() : deps.catalogue.of(req.query.entityName),
  },
});

/** 404 unless the entity has fields, exists (workspaces and tenants), and is within the caller's reach. */
async function entity(deps: CustomFieldDeps, principal: Principal, entityName: string, entityId: string) {
  const fields = deps.catalogue.of(entityName);
  const reach = requireReach(principal);
  const notFound = () => new NotFoundError(`No ${entityName} '${entityId}' with custom fields.`);
  if (reach.kind === "workspace" && (entityName !== "workspace" || entityId !== reach.workspaceKey))
    throw notFound();
  if (fields.length === 0) throw notFound();
  if (!(await deps.values.exists(entityName, entityId))) throw notFound();
  return fields;
}

/** An entity's values of the fields defined now (a value of a field since removed is not shown). */
function valuesReply(
  entityName: string,
  entityId: string,
  fields: Awaited<ReturnType<typeof entity>>,
  stored: Record<string, string>,
) {
  const known = new Set(fields.map((f) => f.key));
  return {
    status: 200 as const,
    body: {
      entityName,
      entityId,
      values: Object.fromEntries(Object.entries(stored).filter(([k]) => known.has(k))),
      fields,
    },
  };
}

export const getValues: Handler<"custom-fields.get"> = async (deps, req) => {
  const { entityName, entityId } = req.params;
  const fields = await entity(deps, req.principal, entityName, entityId);
  return valuesReply(entityName, entityId, fields, await deps.values.values(entityName, entityId));
};

export const putValues: Handler<"custom-fields.put"> = async (deps, req) => {
  const { entityName, entityId } = req.params;
  const fields = await entity(deps, req.principal, entityName, entityId);
  const byKey = new Map(fields.map((f) => [f.key, f]));
  const violations: Array<{ field: string; message: string }> = [];
  const set: Array<[string, string]> = [];
  const unset: string[] = [];
  for (const [key, raw] of Object.entries(req.body.values)) {
    const def = byKey.get(key);
    const field = `/body/values/${key}`;
    if (def === undefined) {
      violations.push({ field, message: `'${entityName}' has no custom field '${key}'` });
      continue;
    }
    if (raw === null) {
      unset.push(key);
      continue;
    }
    const value = serialiseValue(raw) ?? "";
    const problem = checkValue({ ...def, helpText: null, value: null, group: null, order: 0 }, value);
    if (problem !== null) violations.push({ field, message: problem });
    else set.push([key, value]);
  }
  // Required fields must hold a value once the change is applied.
  const after = { ...(await deps.values.values(entityName, entityId)) };
  for (const k of unset) delete after[k];
  for (const [k, v] of set) after[k] = v;
  for (const f of fields) {
    if (f.required && (after[f.key] ?? "").trim() === "") {
      violations.push({ field: `/body/values/${f.key}`, message: "is required" });
    }
  }
  if (violations.length > 0) throw new ValidationError(violations);
  await deps.values.save(entityName, entityId, set, unset, req.principal.subject);
  return valuesReply(entityName, entityId, fields, after);
};
