/**
 * The JSON Schemas of the three files a plugin author writes or generates: registry.json, theme.json and
 * plugin.signature.json. The server validates registry.json with the same schema; editors use the
 * published copies (docs/schemas/, and `GET /schemas/plugins/<file>` on the gateway).
 */
import { type TSchema, Type } from "@sinclair/typebox";

import { ALGORITHM } from "./manifest.js";
import { RegistryJsonSchema } from "./registry.js";

const Hex64 = Type.String({ pattern: "^[0-9a-f]{64}$" });

export const SignatureManifestSchema = Type.Object(
  {
    $schema: Type.Optional(Type.String()),
    schemaVersion: Type.String({ minLength: 1 }),
    pluginId: Type.String({ minLength: 1 }),
    version: Type.String({ minLength: 1, description: "taken from registry.json" }),
    algorithm: Type.Literal(ALGORITHM),
    signerFingerprint: Type.String({
      pattern: "^[0-9a-f]{64}$",
      description: "lower-case hex SHA-256 of the signer's public key (SubjectPublicKeyInfo DER)",
    }),
    files: Type.Array(Type.Object({ path: Type.String({ minLength: 1 }), sha256: Hex64 }), {
      description: "every file of the package but this one, sorted by path",
    }),
    signature: Type.Optional(Type.String({ description: "Base64 ECDSA signature (DER or IEEE P1363)" })),
  },
  { title: "svc plugin.signature.json" },
);

const TemplateDefinition = Type.Object(
  {
    templateKey: Type.Optional(Type.String({ description: "aliases: key, id" })),
    displayName: Type.Optional(Type.String()),
    templatePath: Type.Optional(Type.String({ description: "default views/surface/{templateKey}.html" })),
    parentTemplateKey: Type.Optional(Type.String({ description: "alias: extends" })),
    surface: Type.Optional(Type.String()),
    scope: Type.Optional(Type.String({ default: "workspace" })),
    isActive: Type.Optional(Type.Boolean({ default: true })),
    priority: Type.Optional(Type.Integer({ default: 100 })),
  },
  { additionalProperties: true },
);

const SettingField = Type.Object(
  {
    label: Type.Optional(Type.String()),
    type: Type.Optional(Type.String({ default: "text", description: "e.g. text, color, select" })),
    helpText: Type.Optional(Type.String({ description: "alias: description" })),
    value: Type.Optional(Type.Unknown({ description: "alias: defaultValue" })),
    required: Type.Optional(Type.Boolean()),
    group: Type.Optional(Type.String({ description: "aliases: tab, section" })),
    options: Type.Optional(Type.Array(Type.Unknown())),
    order: Type.Optional(Type.Integer()),
  },
  { additionalProperties: true },
);

/** theme.json is parsed leniently: canonical names here, aliases tolerated. */
export const ThemeJsonSchema = Type.Object(
  {
    $schema: Type.Optional(Type.String()),
    surface: Type.Optional(Type.String({ description: "default surface of the templates" })),
    definitions: Type.Optional(Type.Array(TemplateDefinition, { description: "alias: templates" })),
    config: Type.Optional(
      Type.Object(
        { fields: Type.Optional(Type.Record(Type.String(), SettingField)) },
        { additionalProperties: true },
      ),
    ),
  },
  { additionalProperties: true, title: "svc plugin theme.json" },
);

/** The published schemas by file name, as plain JSON Schema (draft 2020-12). */
export function pluginSchemas(): Record<string, object> {
  const plain = (id: string, schema: TSchema) => ({
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $id: id,
    ...(JSON.parse(JSON.stringify(schema)) as object),
  });
  return {
    "registry.schema.json": plain("registry.schema.json", RegistryJsonSchema),
    "theme.schema.json": plain("theme.schema.json", ThemeJsonSchema),
    "plugin.signature.schema.json": plain("plugin.signature.schema.json", SignatureManifestSchema),
  };
}
