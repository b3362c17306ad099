/** Schemas several services' contracts share: keys, identifiers and the paging shapes. */
import { type TSchema, Type } from "@sinclair/typebox";

/** A workspace's or tenant's key: lower case letters, digits and `-`, 1–63 characters. */
export const KEY_PATTERN = "^[a-z0-9][a-z0-9-]{0,62}$";
export const WorkspaceKey = Type.String({ pattern: KEY_PATTERN });
export const TenantKey = Type.String({ pattern: KEY_PATTERN });
export const Uuid = Type.String({ format: "uuid" });
export const PermissionKeyString = Type.String({
  pattern: "^(\\*|[a-z0-9][a-z0-9-]*(\\.[a-z0-9][a-z0-9-]*)+)$",
  maxLength: 200,
});
export const RoleName = Type.String({ pattern: "^[a-z][a-z0-9._-]{0,62}$" });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** One page of a list: `nextCursor` is passed back as `cursor` for the next page, null on the last. */
export const Page = <T extends TSchema>(item: T) =>
  Type.Object({ items: Type.Array(item), nextCursor: Nullable(Type.String()) });

/** The paging fields of every list's query: `limit` 1–100 (default 50), `cursor` as a previous page issued it. */
export const pageFields = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  cursor: Type.Optional(Type.String({ maxLength: 300 })),
};

/** The query of a list with nothing but paging. */
export const PageQuery = Type.Object(pageFields, { additionalProperties: false });

export const wkParams = Type.Object({ workspaceKey: WorkspaceKey });
export const wkUserParams = Type.Object({ workspaceKey: WorkspaceKey, userId: Uuid });
export const userParams = Type.Object({ userId: Uuid });
export const idParams = Type.Object({ id: Uuid });

/**
 * Values of declared fields (custom fields, theme settings) by field key; each is checked against its
 * field's type and options by the owning service; null removes a value (back to the default).
 */
export const FieldValuesBody = Type.Object(
  {
    values: Type.Record(
      Type.String({ pattern: "^[A-Za-z0-9_.-]{1,100}$" }),
      Nullable(Type.Union([Type.String({ maxLength: 2_000 }), Type.Number(), Type.Boolean()])),
      { maxProperties: 200 },
    ),
  },
  { additionalProperties: false },
);
