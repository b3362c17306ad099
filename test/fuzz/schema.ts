/**
 * Values for the fuzzer: fast-check arbitraries of instances valid for a JSON Schema (the subset TypeBox
 * emits into the OpenAPI description), preferring, where a field or parameter has a name the pool knows,
 * values that exist in the running stack (so that valid requests get past 404 into the handlers), and
 * plausible values by field name where the description gives no schema.
 */
import fc from "fast-check";

export type Schema = Record<string, unknown>;

/** Known values by field or parameter name, harvested from the running stack (see `harvest` in run.ts). */
export type Pool = Readonly<Record<string, readonly string[]>>;

const num = (v: unknown): number | undefined => (typeof v === "number" ? v : undefined);

/** Values of `name` in the pool (exact, then case-insensitive). */
export function known(pool: Pool | undefined, name: string | undefined): readonly string[] {
  if (pool === undefined || name === undefined) return [];
  return pool[name] ?? pool[name.toLowerCase()] ?? [];
}

const plausibleCache = new WeakMap<Pool, Map<string, fc.Arbitrary<unknown>>>();
const NO_POOL: Pool = {};

/** A plausible value for a field the description names but does not describe (built once per name). */
export function plausible(name: string, pool: Pool = NO_POOL): fc.Arbitrary<unknown> {
  const cache = plausibleCache.get(pool) ?? new Map<string, fc.Arbitrary<unknown>>();
  plausibleCache.set(pool, cache);
  const cached = cache.get(name);
  if (cached) return cached;
  const built = buildPlausible(name, pool);
  cache.set(name, built);
  return built;
}

function buildPlausible(name: string, pool: Pool): fc.Arbitrary<unknown> {
  const n = name.toLowerCase();
  let guess: fc.Arbitrary<unknown>;
  if (/url$|uri$/.test(n))
    guess = fc.constantFrom(
      "https://receiver.invalid/hook",
      "http://127.0.0.1:9/hook",
      "https://example.com/a?b=c",
      "ftp://example.com/x",
      "not a url",
    );
  else if (/(secret|password|token|passphrase)$/.test(n))
    guess = fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.string({ minLength: 12, maxLength: 60 }));
  else if (n.includes("email")) guess = fc.oneof(fc.emailAddress(), fc.constant(null));
  else if (/^(is|include|enabled|active|allow)/.test(n)) guess = fc.boolean();
  else if (/(ms|seconds|count|limit|size|priority|attempts|order)$/.test(n))
    guess = fc.integer({ min: -1, max: 10_000 });
  else if (/(permissions|roles|keys|hosts|names|items|values|tags|bindings)$/.test(n))
    guess = fc.array(fc.stringMatching(/^[a-z][a-z0-9-]{0,12}(\.[a-z][a-z0-9-]{0,12}){0,2}$/), {
      maxLength: 4,
    });
  else if (n === "eventname" || n === "event")
    guess = fc.oneof(
      fc.constantFrom("*", "user.created", "user.*", "a.b.c", "+(a|b)?", "ws.*.changed"),
      fc.stringMatching(/^[\w.\-*]{1,40}$/),
    );
  else if (/(key|name|id|scope|type|version|role)$/.test(n))
    guess = fc.oneof(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), fc.uuid());
  else if (/(settings|config|metadata|values|data|payload)$/.test(n))
    guess = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 4 });
  else guess = fc.oneof(fc.string({ maxLength: 40 }), fc.integer(), fc.boolean(), fc.constant(null));
  const values = known(pool, name);
  return values.length > 0 ? fc.oneof(fc.constantFrom(...values), guess) : guess;
}

/** An object of some of `fields`, each with a plausible value. */
export function hintedObject(fields: readonly string[], pool?: Pool): fc.Arbitrary<Record<string, unknown>> {
  if (fields.length === 0) return fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 2 }));
  return fc
    .subarray([...fields], { maxLength: 8 })
    .chain((chosen) =>
      fc.record(
        Object.fromEntries(chosen.map((f) => [f, plausible(f, pool)])) as Record<
          string,
          fc.Arbitrary<unknown>
        >,
      ),
    );
}

/**
 * The fields an open object schema names in its description, as the catalogue writes them:
 * `"eventName, targetUrl, secret (required); workspaceKey, includeSensitiveData"`.
 */
export function describedFields(schema: Schema): { required: string[]; optional: string[] } {
  const text = typeof schema.description === "string" ? schema.description : "";
  const names = (t: string) =>
    [...t.matchAll(/\b[a-z][a-zA-Z0-9]*\b/g)].map((m) => m[0]).filter((w) => w !== "required");
  const marker = text.indexOf("(required)");
  return marker === -1
    ? { required: [], optional: names(text) }
    : { required: names(text.slice(0, marker)), optional: names(text.slice(marker)) };
}

/** True for an object schema that says nothing about its fields (`{}` with additional properties). */
export function isOpaqueObject(schema: Schema | undefined): boolean {
  return (
    schema !== undefined &&
    schema.type === "object" &&
    Object.keys(schema.properties ?? {}).length === 0 &&
    schema.additionalProperties !== false
  );
}

/**
 * A fast-check arbitrary of values valid for `schema`. `name` is the field or parameter the value is for:
 * when the pool knows values of that name (and the schema takes strings), they are preferred half the time.
 */
export function arbitraryFor(
  schema: Schema | undefined,
  o: { name?: string; scope?: string; pool?: Pool; hints?: readonly string[]; depth?: number } = {},
): fc.Arbitrary<unknown> {
  const depth = o.depth ?? 0;
  if (schema === undefined || Object.keys(schema).length === 0)
    return o.name ? plausible(o.name, o.pool) : fc.jsonValue({ maxDepth: 2 });
  const anyOf = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (Array.isArray(anyOf)) return fc.oneof(...anyOf.map((s) => arbitraryFor(s, { ...o, depth })));
  if ("const" in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const child = (s: Schema | undefined, name?: string) =>
    arbitraryFor(s, { pool: o.pool, depth: depth + 1, ...(name === undefined ? {} : { name }) });
  switch (schema.type) {
    case "null":
      return fc.constant(null);
    case "boolean":
      return fc.boolean();
    case "integer":
    case "number": {
      const min = num(schema.minimum) ?? -1_000;
      const max = num(schema.maximum) ?? 1_000;
      return schema.type === "integer"
        ? fc.integer({ min, max })
        : fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
    }
    case "string": {
      const minLength = num(schema.minLength) ?? 0;
      const maxLength = num(schema.maxLength);
      let base: fc.Arbitrary<string>;
      if (schema.format === "uuid") base = fc.uuid();
      else if (schema.format === "email")
        base = fc.emailAddress().filter((e) => e.length <= (maxLength ?? 320));
      else if (schema.format === "date-time")
        base = fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
      else if (typeof schema.pattern === "string")
        base = fc
          .stringMatching(new RegExp(schema.pattern))
          .filter((s) => s.length >= minLength && s.length <= (maxLength ?? 1e9));
      else base = fc.string({ minLength, maxLength: Math.max(minLength, Math.min(maxLength ?? 60, 60)) });
      const fits = (v: string) =>
        v.length >= minLength &&
        v.length <= (maxLength ?? 1e9) &&
        (typeof schema.pattern !== "string" || new RegExp(schema.pattern).test(v));
      // Values found for this very parameter (its parent's listing) first, then any of the same name.
      const scoped = o.scope === undefined ? [] : known(o.pool, `${o.scope}|${o.name}`).filter(fits);
      const general = known(o.pool, o.name).filter(fits);
      const choices: Array<{ arbitrary: fc.Arbitrary<string>; weight: number }> = [
        { arbitrary: base, weight: 2 },
      ];
      if (scoped.length > 0) choices.push({ arbitrary: fc.constantFrom(...scoped), weight: 3 });
      if (general.length > 0) choices.push({ arbitrary: fc.constantFrom(...general), weight: 2 });
      return choices.length === 1 ? base : fc.oneof(...choices);
    }
    case "array": {
      const items = child(schema.items as Schema | undefined, o.name);
      const minLength = num(schema.minItems) ?? 0;
      const maxLength = Math.max(minLength, Math.min(num(schema.maxItems) ?? 5, 5));
      return schema.uniqueItems
        ? fc.uniqueArray(items, { minLength, maxLength, selector: (v) => JSON.stringify(v) })
        : fc.array(items, { minLength, maxLength });
    }
    case "object": {
      if (isOpaqueObject(schema)) {
        const described = describedFields(schema);
        if (described.required.length + described.optional.length === 0)
          return hintedObject(o.hints ?? [], o.pool);
        // Every field the description names, the required ones always; now and then one of the hints too.
        const fields = [...described.required, ...described.optional];
        return fc
          .tuple(
            fc.record(Object.fromEntries(fields.map((f) => [f, plausible(f, o.pool)])), {
              requiredKeys: described.required,
            }),
            fc.oneof(
              { arbitrary: fc.constant<Record<string, unknown>>({}), weight: 4 },
              { arbitrary: hintedObject(o.hints ?? [], o.pool), weight: 1 },
            ),
          )
          .map(([named, more]) => ({ ...more, ...named }));
      }
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = new Set((schema.required ?? []) as string[]);
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, s] of Object.entries(properties)) record[name] = child(s, name);
      return fc.record(record, { requiredKeys: [...required].filter((k) => k in record) });
    }
    default:
      return depth > 2 ? fc.constant(null) : fc.jsonValue({ maxDepth: 2 });
  }
}

/** Every property name in a schema, at any depth (the hints for bodies the description leaves open). */
export function propertyNames(schema: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(schema)) for (const s of schema) propertyNames(s, into);
  else if (schema !== null && typeof schema === "object") {
    const s = schema as Schema;
    if (s.properties && typeof s.properties === "object") {
      for (const [name, sub] of Object.entries(s.properties)) {
        into.add(name);
        propertyNames(sub, into);
      }
    }
    for (const k of ["items", "anyOf", "oneOf", "allOf"]) if (k in s) propertyNames(s[k], into);
  }
  return into;
}
