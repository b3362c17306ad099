/**
 * The gateway's request validation: Fastify's Ajv settings (defaults applied, additional properties of
 * closed objects dropped), every violation listed, and type coercion only where HTTP carries strings.
 * Path parameters and query strings are text, so `?limit=5` becomes 5; a JSON body already has types, so
 * `{"displayName": 1.5}` is refused instead of becoming "1.5".
 */
import { Ajv, type Options } from "ajv";
import addFormats from "ajv-formats";
import fastUri from "fast-uri";
import type { FastifySchemaCompiler } from "fastify";

const shared: Options = {
  useDefaults: true,
  removeAdditional: true,
  uriResolver: fastUri,
  addUsedSchema: false,
  // Every violation is listed. Bodies are limited (BackendHost:MaxRequestBodyBytes) and every array of a
  // contract has maxItems, so the extra work on a bad request stays bounded.
  allErrors: true,
};

function ajv(coerceTypes: Options["coerceTypes"]) {
  const instance = new Ajv({ ...shared, coerceTypes });
  addFormats.default(instance);
  return instance;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const coercing = ajv("array");
  const strict = ajv(false);
  return ({ schema, httpPart }) => (httpPart === "body" ? strict : coercing).compile(schema as object);
}
