/**
 * The gateway's request validation: Fastify's Ajv settings (defaults applied, additional properties of
 * closed objects dropped), every violation listed, and type coercion only where HTTP carries strings.
 * Path parameters and query strings are text, so `?limit=5` becomes 5; a JSON body already has types, so
 * `{"displayName": 1.5}` is refused instead of becoming "1.5".
 */
import { Ajv, type Options } from "ajv";
import addFormats from "ajv-formats";
import fastUri from "fast-uri";
import type { FastifySchemaCompiler, FastifySchemaValidationError } from "fastify";

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

/** What Fastify calls to validate one part of a request; Ajv's answer puts the violations on `errors`. */
type Validate = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

/**
 * `lazy`: each route's schemas are compiled when the route first takes a request, not when the route is
 * registered. The gateway has a few hundred routes, most of them called rarely (operators' actions);
 * compiling all of them at start held about 10 MB of generated code and Ajv's bookkeeping in every idle
 * gateway (docs/architecture.md, memory). The first request of a route waits for its compilation (1 to
 * 2 ms for the contracts' request schemas; the first of all about 50 ms while Ajv itself warms up).
 * Production runs lazy; development and tests compile every schema at start, so a schema Ajv refuses
 * stops the gateway there instead of answering 500 on its route in production.
 */
export function validatorCompiler(options: { readonly lazy: boolean }): FastifySchemaCompiler<unknown> {
  const coercing = ajv("array");
  const strict = ajv(false);
  const compile = (schema: object, httpPart: string | undefined): Validate =>
    (httpPart === "body" ? strict : coercing).compile(schema) as Validate;
  if (!options.lazy) return ({ schema, httpPart }) => compile(schema as object, httpPart);
  return ({ schema, httpPart }) => {
    let compiled: Validate | undefined;
    const validate: Validate = (data) => {
      compiled ??= compile(schema as object, httpPart);
      const valid = compiled(data);
      validate.errors = compiled.errors;
      return valid;
    };
    return validate;
  };
}
