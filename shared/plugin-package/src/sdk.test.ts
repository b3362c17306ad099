/**
 * The plugin SDK's declarations of theme.json and plugin.signature.json name the same
 * members as the JSON Schemas the platform publishes and validates with, so an author who follows the
 * types writes what the platform reads.
 */
import type { TObject } from "@sinclair/typebox";
import type {
  SignatureManifest,
  ThemeDefinitionDeclaration,
  ThemeDescriptor,
  ThemeFieldDeclaration,
} from "@svc/plugin-sdk";
import { describe, expect, it } from "vitest";

import { SignatureManifestSchema, ThemeJsonSchema } from "./schemas.js";

const keys = (o: object) => Object.keys(o).sort();
/** The members of an SDK interface, listed once; `satisfies` fails to compile on a missing or extra one. */
const members = <T>(o: Record<keyof T, true>) => keys(o);

describe("the plugin SDK's file declarations", () => {
  it("theme.json: the root, a definition and a setting field", () => {
    expect(keys(ThemeJsonSchema.properties)).toEqual(
      members<ThemeDescriptor>({ $schema: true, surface: true, definitions: true, config: true }),
    );
    const definition = ThemeJsonSchema.properties.definitions.items as TObject;
    expect(keys(definition.properties)).toEqual(
      members<ThemeDefinitionDeclaration>({
        templateKey: true,
        displayName: true,
        templatePath: true,
        parentTemplateKey: true,
        surface: true,
        scope: true,
        isActive: true,
        priority: true,
      }),
    );
    const field = ThemeJsonSchema.properties.config.properties.fields.patternProperties;
    const fieldSchema = Object.values(field)[0] as TObject;
    expect(keys(fieldSchema.properties)).toEqual(
      members<ThemeFieldDeclaration>({
        label: true,
        type: true,
        helpText: true,
        value: true,
        required: true,
        group: true,
        options: true,
        order: true,
      }),
    );
  });

  it("plugin.signature.json", () => {
    expect(keys(SignatureManifestSchema.properties).filter((k) => k !== "$schema")).toEqual(
      members<SignatureManifest>({
        schemaVersion: true,
        pluginId: true,
        version: true,
        algorithm: true,
        signerFingerprint: true,
        files: true,
        signature: true,
      }),
    );
  });
});
