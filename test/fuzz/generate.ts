/**
 * Request generation for the fuzzer: the operations of the gateway's OpenAPI
 * description plus the public routes it leaves out, and, for each, valid requests and mutated ones, for
 * every kind of caller. Everything is drawn by fast-check from one seed, so a run can be repeated.
 */
import fc from "fast-check";

import type { Caller } from "./callers.js";
import { arbitraryFor, type Pool, propertyNames, type Schema } from "./schema.js";

export interface Operation {
  /** `METHOD /path/{param}`, as in the OpenAPI description. */
  readonly id: string;
  readonly method: string;
  readonly path: string;
  /** The first two path segments: `/api/users`, `/workspace/public`. */
  readonly group: string;
  readonly kind: "operator" | "public";
  readonly pathParams: ReadonlyArray<{ name: string; schema: Schema | undefined }>;
  readonly queryParams: ReadonlyArray<{ name: string; schema: Schema | undefined; required: boolean }>;
  readonly body?: Schema;
  /** Field names for a body the description leaves open (from response schemas of the same resource). */
  readonly hints: readonly string[];
  readonly permission?: string;
  readonly alternatives: readonly string[];
  readonly platformOnly: boolean;
}

export const MUTATIONS = [
  "valid",
  "wrong-type",
  "empty",
  "huge-string",
  "nul",
  "unicode",
  "deep-nesting",
  "wide",
  "unknown-fields",
  "numbers",
  "bad-cursor",
  "bad-encoding",
  "long-segment",
  "long-query",
  "dup-params",
  "proto-query",
  "media-type",
  "content-encoding",
  "bad-json",
  "oversized-body",
  "method",
  "host",
  "headers",
  "bad-auth",
  "idempotency",
  "raw-http",
  "race",
] as const;
export type Mutation = (typeof MUTATIONS)[number];

export interface FuzzRequest {
  /** The operation generated from. */
  readonly operation: string;
  /** The operation the request reaches when its method was changed (else the same). */
  readonly target: string;
  readonly group: string;
  readonly kind: Operation["kind"];
  readonly mutation: Mutation;
  readonly variant: string;
  readonly caller: string;
  readonly method: string;
  /** Path and query, as sent. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** How `body` becomes bytes (default utf8); latin1 carries invalid UTF-8. */
  readonly bodyEncoding?: "utf8" | "latin1" | "utf16le";
  /** For raw-http: the whole request, as latin1 bytes, written to a plain socket. */
  readonly raw?: string;
  /** True when a 2xx answer would be an authorisation bypass. */
  readonly mustDeny: boolean;
  /** Set when the route's contract demands a 200 whatever the input (the public resolve route). */
  readonly mustAnswer200?: string;
  /** For race: requests sent alongside this one, each after its delay. */
  readonly companions?: ReadonlyArray<FuzzRequest & { readonly delayMs: number }>;
}

interface OpenApiOperation {
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: Schema }>;
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
  "x-svc-permission"?: string;
  "x-svc-permission-alternatives"?: string[];
  "x-svc-platform-scope-only"?: boolean;
}
export interface OpenApi {
  readonly paths: Record<string, Record<string, OpenApiOperation>>;
}

const groupOf = (path: string) => path.split("/").slice(0, 3).join("/");
const METHODS = new Set(["get", "post", "put", "delete", "patch"]);

/** Field names every open body may carry, beside those of its resource's response schemas. */
const COMMON_FIELDS = [
  "key",
  "name",
  "tenantKey",
  "workspaceKey",
  "type",
  "hosts",
  "pathPrefix",
  "description",
  "displayName",
  "value",
  "settings",
  "version",
  "enabled",
  "isActive",
  "permissions",
  "roles",
  "secret",
  "url",
];

/** The operations of an OpenAPI description, plus the public routes it leaves out. */
export function operationsOf(openapi: OpenApi): Operation[] {
  const out: Operation[] = [];
  const responseOf = (path: string, method: string) =>
    openapi.paths[path]?.[method]?.responses?.["200"]?.content?.["application/json"]?.schema;
  for (const [path, methods] of Object.entries(openapi.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      if (!METHODS.has(method)) continue;
      const params = op.parameters ?? [];
      const parent = path.replace(/\/\{[^}]+\}[^{]*$/, "");
      const hints = propertyNames([
        responseOf(path, method),
        responseOf(path, "get"),
        responseOf(parent, "get"),
      ]);
      for (const f of COMMON_FIELDS) hints.add(f);
      const body = op.requestBody?.content?.["application/json"]?.schema;
      out.push({
        id: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        group: groupOf(path),
        // Sign-in and the JWKS are described too; they need no session.
        kind: op["x-svc-permission"] ? "operator" : "public",
        pathParams: params.filter((p) => p.in === "path").map((p) => ({ name: p.name, schema: p.schema })),
        queryParams: params
          .filter((p) => p.in === "query")
          .map((p) => ({ name: p.name, schema: p.schema, required: p.required === true })),
        ...(body
          ? { body }
          : method === "post" || method === "put"
            ? { body: { type: "object", properties: {}, additionalProperties: true } }
            : {}),
        hints: [...hints],
        ...(op["x-svc-permission"] ? { permission: op["x-svc-permission"] } : {}),
        alternatives: op["x-svc-permission-alternatives"] ?? [],
        platformOnly: op["x-svc-platform-scope-only"] === true,
      });
    }
  }
  const pub = (
    method: string,
    path: string,
    extra: Partial<Pick<Operation, "pathParams" | "queryParams" | "body" | "hints">> = {},
  ): Operation => ({
    id: `${method} ${path}`,
    method,
    path,
    group: groupOf(path),
    kind: "public",
    pathParams: [],
    queryParams: [],
    hints: [],
    alternatives: [],
    platformOnly: false,
    ...extra,
  });
  const known = new Set(out.map((o) => o.id));
  for (const op of [
    pub("GET", "/workspace/public/resolve", {
      queryParams: [{ name: "workspaceKey", schema: { type: "string", maxLength: 63 }, required: false }],
    }),
    // Public routes the spec lists and this gateway may not serve yet: 404 problems, never a 5xx.
    pub("GET", "/workspace/public/{rest}", {
      pathParams: [{ name: "rest", schema: { type: "string", pattern: "^[a-z][a-z0-9-]{0,20}$" } }],
    }),
    pub("GET", "/health"),
    pub("GET", "/ready"),
    pub("GET", "/metrics"),
    pub("GET", "/openapi.json"),
    pub("GET", "/.well-known/jwks.json"),
    pub("POST", "/api/auth/login", {
      body: {
        type: "object",
        properties: {
          username: { type: "string", minLength: 1, maxLength: 100 },
          password: { type: "string", minLength: 1, maxLength: 200 },
          workspaceKey: { anyOf: [{ type: "string", maxLength: 63 }, { type: "null" }] },
        },
        required: ["username", "password"],
      },
    }),
  ])
    if (!known.has(op.id)) out.push(op);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Mutations

const STRANGERS: readonly unknown[] = [
  12345,
  -1,
  true,
  false,
  null,
  [],
  {},
  "text",
  1.5,
  [[]],
  { a: {} },
  [1, "a"],
];

/** Cursors in no format the server issues: random base64url, JSON of wrong types, huge numbers, NUL. */
export const junkCursor: fc.Arbitrary<string> = fc.oneof(
  fc
    .base64String({ maxLength: 120 })
    .map((s) => s.replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "")),
  fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? "null").toString("base64url")),
  fc
    .array(fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null), fc.double()), {
      maxLength: 4,
    })
    .map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
  fc.string({ maxLength: 60 }),
  fc.constantFrom(
    "",
    "-1",
    "0",
    "null",
    "undefined",
    "9".repeat(400),
    "%00",
    "\u0000",
    "a\u0000b",
    "=",
    "====",
    "!!!",
    "..%2F..%2F",
    Buffer.from("\u0000\u0000\u0000").toString("base64url"),
    Buffer.from("99999999999999999999999").toString("base64url"),
    Buffer.from(JSON.stringify({ at: "9999-99-99", id: "x" })).toString("base64url"),
    Buffer.from('{"at":1e309,"id":-1,"n":18446744073709551616}').toString("base64url"),
    Buffer.from(JSON.stringify(["x", "9223372036854775808", "+275760-09-13T00:00:00.000Z"])).toString(
      "base64url",
    ),
    Buffer.from(JSON.stringify({ __proto__: { a: 1 }, id: { $gt: "" } })).toString("base64url"),
    Buffer.from(JSON.stringify("a".repeat(300))).toString("base64url"),
    Buffer.from([0xff, 0xfe, 0xfd]).toString("base64url"),
  ),
);

const HOSTS = fc.oneof(
  fc.constantFrom(
    "localhost",
    "127.0.0.1",
    "LOCALHOST.",
    "localhost:99999",
    "xn--nxasmq6b",
    "a".repeat(300),
    "[::1]",
    "[::1",
    "[zz]:80",
    "a..b",
    "-a-",
    "localhost, evil.example",
    Buffer.from("ＬＯＣＡＬＨＯＳＴ").toString("latin1"),
    "",
  ),
  fc.domain(),
  fc.string({ maxLength: 40 }).map((s) => s.replace(/[\r\n]/g, "")),
);

const FORWARDED_URIS = [
  "/",
  "//x",
  "/%00",
  "/a/../../b",
  "http://evil/",
  "/%FF%FE",
  "/%",
  `/${"a/".repeat(2_000)}`,
  "/\u00e9t\u00e9",
  "?q#f",
  "/./.././",
  "\\\\evil\\x",
  // Within the 2,048 characters the resolver takes, but longer than that once %-encoded.
  `/${"\u00e9".repeat(1_500)}`,
  `/shop/${"<>".repeat(900)}`,
  `/${" a".repeat(1_000)}`,
];

const UNICODE = [
  "a\ud800b",
  "\udfff",
  "\uffff\ufffe",
  "\u202eevil",
  "zero\u200bwidth",
  "e\u0301\u0301\u0301",
  "😀".repeat(50),
  "\u2028\u2029",
  "\u0007\u001b[31m",
  "Ω≈ç√∫",
];

interface Values {
  readonly pathValues: string[];
  readonly query: unknown[];
  readonly body: unknown;
}

interface Drawn extends Values {
  readonly op: Operation;
  readonly caller: Caller;
  readonly badAuth: Caller;
  readonly mutation: Mutation;
  readonly pick: number;
  readonly size: number;
  readonly cursor: string;
  readonly host: string;
  readonly stranger: unknown;
}

function replaceOne(value: unknown, replacement: (old: unknown) => unknown, pick: number): unknown {
  if (Array.isArray(value)) {
    if (value.length === 0) return [replacement(undefined)];
    const copy = [...value];
    copy[pick % copy.length] = replacement(copy[pick % copy.length]);
    return copy;
  }
  if (typeof value !== "object" || value === null) return replacement(value);
  const keys = Object.keys(value);
  if (keys.length === 0) return { field: replacement("") };
  const key = keys[pick % keys.length] as string;
  return { ...value, [key]: replacement((value as Record<string, unknown>)[key]) };
}

const at = <T>(list: readonly T[], i: number): T => list[i % list.length] as T;

/** Routes whose contract is a 200 for any host, forwarded URI and query, and where it is written. */
const CONTRACTS: Readonly<Record<string, string>> = {
  "GET /workspace/public/resolve":
    "always 200 with a ResolveResult (public-workspace.ts: never fails for an unknown host)",
};
/** Mutations that change nothing the framework refuses before the route (the route must answer 200). */
const ALWAYS_200_MUTATIONS = new Set<Mutation>([
  "valid",
  "host",
  "headers",
  "bad-auth",
  "idempotency",
  "proto-query",
  "dup-params",
  "bad-cursor",
  "wrong-type",
  "empty",
  "unknown-fields",
]);

/** One request from the values drawn for it. */
/**
 * The operation a router would pick for a method and a concrete path: of the templates that match, the one
 * with the most literal segments (find-my-way prefers a static segment to a parameter).
 */
function routeOf(operations: readonly Operation[], method: string, path: string): string | undefined {
  const segments = path.split("/");
  let best: { id: string; literal: number } | undefined;
  for (const op of operations) {
    if (op.method !== method) continue;
    const template = op.path.split("/");
    if (template.length !== segments.length) continue;
    let literal = 0;
    const matches = template.every((t, i) => {
      // find-my-way lets a parameter be empty (`/api/tenants//plugins/delegations`).
      if (/^\{\w+\}$/.test(t)) return true;
      if (t === segments[i]) literal++;
      return t === segments[i];
    });
    if (matches && (best === undefined || literal > best.literal)) best = { id: op.id, literal };
  }
  return best?.id;
}

function build(d: Drawn, operations: readonly Operation[]): FuzzRequest {
  const { op, pick } = d;
  const segments = d.pathValues.map((s) => encodeURIComponent(s));
  const queryPairs: Array<[string, string]> = [];
  op.queryParams.forEach((p, i) => {
    const value = d.query[i];
    if (value === undefined) return;
    if (Array.isArray(value)) for (const v of value) queryPairs.push([p.name, String(v)]);
    else queryPairs.push([p.name, typeof value === "string" ? value : JSON.stringify(value)]);
  });
  const writes = op.method === "POST" || op.method === "PUT" || op.method === "PATCH";
  let body: unknown = writes ? d.body : undefined;
  let rawBody: string | undefined;
  let bodyEncoding: FuzzRequest["bodyEncoding"];
  let method = op.method;
  let contentType: string | undefined = "application/json";
  let rawQuery: string | undefined;
  let raw: string | undefined;
  let variant = "";
  let caller = d.caller;
  const extra: Record<string, string> = {};
  const setQuery = (value: string) => {
    if (queryPairs.length > 0) (queryPairs[pick % queryPairs.length] as [string, string])[1] = value;
    else queryPairs.push([op.queryParams[0]?.name ?? "q", value]);
  };

  switch (d.mutation) {
    case "valid":
      break;
    case "wrong-type":
      if (body !== undefined && pick % 4 === 0) {
        body = d.stranger;
        variant = "whole body";
      } else if (body !== undefined) {
        body = replaceOne(body, () => d.stranger, pick);
        variant = "one field";
      } else if (queryPairs.length > 0 || op.queryParams.length > 0) {
        setQuery(at(["[object]", "true", "-", "1.5", "null", "[]", "{}", "NaN", "-0"], pick));
        variant = "query";
      } else if (segments.length > 0) {
        segments[pick % segments.length] = at(["12345", "true", "null", "-1", "[]", "{}", "undefined"], pick);
        variant = "path";
      }
      break;
    case "empty":
      if (body !== undefined) {
        const v = pick % 4;
        variant = ["empty object", "empty strings", "empty body", "empty array"][v] as string;
        if (v === 0) body = {};
        else if (v === 1)
          body =
            typeof body === "object" && body !== null && !Array.isArray(body)
              ? Object.fromEntries(Object.keys(body).map((k) => [k, ""]))
              : "";
        else if (v === 2) rawBody = "";
        else body = [];
      } else if (op.queryParams.length > 0) {
        rawQuery = op.queryParams.map((p) => `${p.name}=`).join("&");
        variant = "query";
      } else if (segments.length > 0) {
        segments[pick % segments.length] = pick % 2 === 0 ? "" : "%20";
        variant = "path";
      }
      break;
    case "huge-string": {
      const huge = (pick % 3 === 0 ? "\u00e9" : "x").repeat(d.size);
      if (body !== undefined) {
        body = replaceOne(body, () => huge, pick);
        variant = "body field";
      } else if (op.queryParams.length > 0) {
        setQuery("x".repeat(5_000));
        variant = "query";
      } else if (segments.length > 0) {
        segments[pick % segments.length] = "x".repeat(300);
        variant = "path";
      }
      break;
    }
    case "nul": {
      const v = pick % 4;
      if (body !== undefined && v === 0) {
        body = replaceOne(body, (old) => `${typeof old === "string" ? old : "a"}\u0000b`, pick);
        variant = "escaped in a body string";
      } else if (body !== undefined && v === 1) {
        rawBody = JSON.stringify(replaceOne(body, () => "__NUL__", pick)).replace("__NUL__", "a\u0000b");
        variant = "raw byte in the JSON text";
      } else if (body !== undefined && v === 2) {
        rawBody = JSON.stringify({ ...(typeof body === "object" ? body : {}), "\u0000": 1 });
        variant = "in a field name";
      } else if (segments.length > 0 && pick % 2 === 0) {
        segments[pick % segments.length] = `a%00b`;
        variant = "path";
      } else {
        setQuery("a\u0000b");
        variant = "query";
      }
      break;
    }
    case "unicode": {
      const text = at(UNICODE, pick);
      const v = pick % 4;
      if (body !== undefined && v < 2) {
        body = replaceOne(body, () => text, pick);
        variant = "body string";
      } else if (body !== undefined && v === 2) {
        // Bytes that are not UTF-8 at all: a lone 0xFF, an overlong NUL, a truncated sequence.
        rawBody = `{"name":"${at(["\u00ff\u00fe", "\u00c0\u0080", "\u00e2\u0082", "\u00ed\u00a0\u0080"], pick)}"}`;
        bodyEncoding = "latin1";
        variant = "invalid UTF-8 body";
      } else if (segments.length > 0 && pick % 2 === 0) {
        segments[pick % segments.length] = at(
          ["%ED%A0%80", encodeURIComponent("\u202e"), "%F0%9F%98%80"],
          pick,
        );
        variant = "path";
      } else {
        setQuery(at(["\u202e", "\uffff", "😀", "e\u0301"], pick));
        variant = "query";
      }
      break;
    }
    case "deep-nesting": {
      const depth = 10_000;
      if (pick % 2 === 0) {
        rawBody = `{"a":${"[".repeat(depth)}${"]".repeat(depth)}}`;
        variant = "10,000 arrays";
      } else {
        rawBody = `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
        variant = "10,000 objects";
      }
      if (!writes) {
        queryPairs.push(["q", "[".repeat(2_000)]);
        rawQuery = `${new URLSearchParams(queryPairs).toString()}&${"a[b]".repeat(500)}=1`;
      }
      break;
    }
    case "wide":
      if (pick % 2 === 0) {
        rawBody = JSON.stringify({ ...(typeof body === "object" ? body : {}), many: Array(100_000).fill(1) });
        variant = "array of 100,000";
      } else {
        rawBody = `{${Array.from({ length: 20_000 }, (_v, i) => `"k${i}":${i}`).join(",")}}`;
        variant = "object of 20,000 keys";
      }
      break;
    case "unknown-fields":
      if (typeof body === "object" && body !== null && !Array.isArray(body)) {
        rawBody = JSON.stringify({ ...body, unexpected: 1, isAdmin: true, role: "superadmin" }).replace(
          /^\{/,
          '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},',
        );
        variant = "body";
      } else {
        queryPairs.push(["unexpected", "1"], ["isAdmin", "true"]);
        variant = "query";
      }
      break;
    case "numbers": {
      const n = at(
        ["1e309", "-1", "9223372036854775808", "-0", "1.5e-400", "0.5", "1e21", "-9007199254740993"],
        pick,
      );
      if (body !== undefined) {
        rawBody = JSON.stringify(replaceOne(body, () => "__NUMBER__", pick)).replace('"__NUMBER__"', n);
        variant = `body ${n}`;
      } else {
        queryPairs.push([
          "limit",
          at(["1e309", "-1", "9223372036854775808", "NaN", "0x10", "Infinity", "1.5", "0"], pick),
        ]);
        variant = "query limit";
      }
      break;
    }
    case "bad-cursor":
      queryPairs.push(["cursor", d.cursor]);
      if (pick % 3 === 0) queryPairs.push(["limit", "1"]);
      break;
    case "bad-encoding":
      rawQuery = at(
        ["%FF%FE", "%", "%zz", "a=%E0%A4%A", "workspaceKey=%C0%80", "%%", "a=%", "=%00", "cursor=%ED%A0%80"],
        pick,
      );
      if (segments.length > 0)
        segments[pick % segments.length] = at(["%FF%FE", "%", "%zz", "%C0%AF", "%2e%2e", "%2F"], pick);
      break;
    case "long-segment":
      if (segments.length > 0) segments[pick % segments.length] = "a".repeat(5_000);
      else rawQuery = `x=${"a".repeat(5_000)}`;
      break;
    case "long-query":
      rawQuery = `q=${"a".repeat(70_000)}`;
      break;
    case "dup-params": {
      const names = op.queryParams.length > 0 ? op.queryParams.map((p) => p.name) : ["limit", "cursor"];
      rawQuery = names
        .flatMap((n) => [`${n}=1`, `${n}=2`, `${n}[]=3`, `${n}[a]=4`])
        .concat(queryPairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`))
        .join("&");
      break;
    }
    case "proto-query":
      queryPairs.push(
        ["__proto__", "x"],
        ["constructor", "y"],
        ["__proto__[polluted]", "1"],
        ["toString", "1"],
        ["hasOwnProperty", "1"],
      );
      break;
    case "media-type":
      contentType = at(
        [
          "text/plain",
          "application/xml",
          "application/json; charset=latin1",
          "multipart/form-data",
          "application/x-www-form-urlencoded",
          "application/json, text/plain",
          "!!!",
          "application/json; charset=utf-16",
          "application/problem+json",
          "application/vnd.api+json",
        ],
        pick,
      );
      variant = contentType;
      if (contentType.endsWith("utf-16")) bodyEncoding = "utf16le";
      if (body === undefined) body = {};
      break;
    case "content-encoding":
      extra["content-encoding"] = at(["gzip", "deflate", "br", "identity", "gzip, gzip", "x-garbage"], pick);
      variant = extra["content-encoding"];
      if (body === undefined) body = {};
      break;
    case "bad-json":
      rawBody = at(
        [
          "{not json",
          "[]",
          "null",
          '"str"',
          "{",
          '{"a":1}}',
          "\u0000",
          "\ufeff{}",
          '{"a":1,"a":2}',
          `{"a":${"1".repeat(5_000)}}`,
          "{'a':1}",
          '{"a":NaN}',
          "1 2",
        ],
        pick,
      );
      variant = JSON.stringify(rawBody.slice(0, 12));
      break;
    case "oversized-body":
      rawBody = JSON.stringify({ a: "x".repeat(1_100_000) });
      variant = "1.1 MB";
      break;
    case "method":
      method = at(
        ["PATCH", "DELETE", "PUT", "POST", "OPTIONS", "GET", "HEAD", "PROPFIND", "SEARCH"].filter(
          (m) => m !== op.method,
        ),
        pick,
      );
      variant = method;
      break;
    case "host":
      extra.host = d.host;
      extra["x-forwarded-host"] = d.host;
      extra["x-forwarded-uri"] = at(FORWARDED_URIS, pick);
      break;
    case "headers":
      variant = at(["accept", "forwarded-for", "request-id", "many", "conditional"], pick);
      if (variant === "accept") {
        extra.accept = "application/xml;q=1, */*;q=-1";
        extra["accept-encoding"] = "gzip;q=2, br;q=NaN";
        extra["accept-language"] = "zz".repeat(500);
      } else if (variant === "forwarded-for") {
        extra["x-forwarded-for"] = at(
          ["garbage", "999.1.1.1, ::zz", Array(1_000).fill("10.0.0.1").join(", ")],
          pick,
        );
        extra.forwarded = 'for="[::1]";proto=ftp;by=unknown';
      } else if (variant === "request-id") {
        extra["x-request-id"] = at(["\u00ff".repeat(100), "a".repeat(8_000), "../../x", ""], pick);
      } else if (variant === "many") {
        for (let i = 0; i < 150; i++) extra[`x-fuzz-${i}`] = String(i);
      } else {
        extra["if-none-match"] = "*";
        extra["if-modified-since"] = "not a date";
        extra.range = "bytes=999999999-0";
        extra.expect = "100-continue";
      }
      break;
    case "bad-auth":
      caller = d.badAuth;
      variant = caller.name;
      break;
    case "idempotency":
      extra["idempotency-key"] = at(
        [
          "fuzz-shared-key",
          `fuzz-${pick}`,
          "",
          "k".repeat(256),
          "k".repeat(8_000),
          "key with spaces",
          "\u00e9t\u00e9",
          "../../etc/passwd",
          "*",
        ],
        pick,
      );
      variant =
        extra["idempotency-key"].length > 40
          ? `${extra["idempotency-key"].length} chars`
          : extra["idempotency-key"];
      break;
    case "raw-http":
    case "race":
      break;
  }

  let i = 0;
  const path = op.path.replace(/\{(\w+)\}/g, () => segments[i++] ?? "x");
  const query = rawQuery ?? new URLSearchParams(queryPairs).toString();
  const fullPath = query ? `${path}?${query}` : path;
  const sendsBody =
    rawBody !== undefined ||
    (body !== undefined && method !== "GET" && method !== "HEAD" && d.mutation !== "method");
  const bodyText = sendsBody ? (rawBody ?? JSON.stringify(body) ?? "null") : undefined;
  const headers: Record<string, string> = { host: "localhost", ...caller.headers, ...extra };
  if (bodyText !== undefined && contentType !== undefined) headers["content-type"] = contentType;

  if (d.mutation === "raw-http") {
    const auth = Object.entries(caller.headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    const forms = [
      [
        "conflicting lengths",
        `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      ],
      [
        "bad chunk size",
        `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      ],
      [
        "negative length",
        `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Length: -1\r\n\r\n`,
      ],
      [
        "two lengths",
        `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
      ],
      ["header without colon", `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}Garbage\r\n\r\n`],
      ["NUL in header", `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}X-A: a\u0000b\r\n\r\n`],
      ["space in path", `${method} ${path}/a b HTTP/1.1\r\nHost: localhost\r\n${auth}\r\n`],
      ["raw UTF-8 in path", `${method} ${path}/\u00c3\u00a9 HTTP/1.1\r\nHost: localhost\r\n${auth}\r\n`],
      [
        "absolute form",
        `${method} http://evil.example${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}\r\n`,
      ],
      ["HTTP/1.0 no host", `${method} ${fullPath} HTTP/1.0\r\n${auth}\r\n`],
      ["HTTP/2.0 version", `${method} ${fullPath} HTTP/2.0\r\nHost: localhost\r\n${auth}\r\n`],
      ["lower-case method", `${method.toLowerCase()} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}\r\n`],
      ["no host header", `${method} ${fullPath} HTTP/1.1\r\n${auth}\r\n`],
      ["two hosts", `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n${auth}\r\n`],
      [
        "obsolete line folding",
        `${method} ${fullPath} HTTP/1.1\r\nHost: localhost\r\n${auth}X-A: a\r\n b\r\n\r\n`,
      ],
      ["bare LF", `${method} ${fullPath} HTTP/1.1\nHost: localhost\n${auth.replaceAll("\r\n", "\n")}\n`],
    ] as const;
    const [name, text] = at(forms, pick);
    variant = name;
    raw = text;
  }

  const decoded = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const params: Record<string, string> = {};
  op.pathParams.forEach((p, k) => (params[p.name] = decoded(segments[k] ?? "")));
  // Fastify answers HEAD with the GET route.
  const target = routeOf(operations, method === "HEAD" ? "GET" : method, path) ?? `${method} ${op.path}`;
  const mustDeny =
    op.kind === "operator" &&
    method === op.method &&
    target === op.id &&
    caller.denies({
      permission: op.permission,
      alternatives: op.alternatives,
      platformOnly: op.platformOnly,
      params,
    });
  const contract = CONTRACTS[op.id];
  const mustAnswer200 =
    contract !== undefined &&
    method === op.method &&
    target === op.id &&
    ALWAYS_200_MUTATIONS.has(d.mutation) &&
    // The edge refuses a NUL anywhere in the query (documented in edge.ts).
    !query.toLowerCase().includes("%00") &&
    !query.includes("\u0000")
      ? contract
      : undefined;
  const request: FuzzRequest = {
    ...(mustAnswer200 ? { mustAnswer200 } : {}),
    operation: op.id,
    target,
    group: op.group,
    kind: op.kind,
    mutation: d.mutation,
    variant,
    caller: d.mutation === "bad-auth" ? `bad auth: ${caller.name}` : caller.name,
    method,
    path: fullPath,
    headers,
    ...(bodyText !== undefined ? { body: bodyText } : {}),
    ...(bodyEncoding && bodyText !== undefined ? { bodyEncoding } : {}),
    ...(raw !== undefined ? { raw } : {}),
    mustDeny,
  };
  if (d.mutation !== "race") return request;
  // The same request twice more at once, or the resource's DELETE landing while it runs (a write that
  // hashes a password or waits for the database leaves a window).
  const remove = op.method === "DELETE" ? undefined : deleteOf(operations, op.path);
  if (remove !== undefined && pick % 2 === 0) {
    const values = new Map(op.pathParams.map((p, k) => [p.name, segments[k] ?? "x"]));
    const removePath = remove.path.replace(/\{(\w+)\}/g, (_m, name: string) => values.get(name) ?? "x");
    const headers = Object.fromEntries(Object.entries(request.headers).filter(([k]) => k !== "content-type"));
    return {
      ...request,
      variant: `with ${remove.id}`,
      companions: [
        {
          group: request.group,
          kind: request.kind,
          mutation: "race",
          variant: `alongside ${op.id}`,
          caller: request.caller,
          operation: remove.id,
          target: remove.id,
          method: "DELETE",
          path: removePath,
          headers,
          mustDeny: false,
          delayMs: pick % 60,
        },
      ],
    };
  }
  return {
    ...request,
    variant: "same request 3 times at once",
    companions: [
      { ...request, delayMs: 0 },
      { ...request, delayMs: pick % 20 },
    ],
  };
}

/** The DELETE of the resource a path names, or of the nearest resource above it. */
function deleteOf(operations: readonly Operation[], path: string): Operation | undefined {
  return operations
    .filter(
      (o) =>
        o.method === "DELETE" && o.kind === "operator" && (path === o.path || path.startsWith(`${o.path}/`)),
    )
    .sort((a, b) => b.path.length - a.path.length)[0];
}

/**
 * The arbitrary of one request: an operation (served operator routes three times as often as those no
 * service answers yet), a caller, a mutation (valid four times as often as each other one) and the
 * values it needs, valid ones preferring what the pool knows exists.
 */
export function requestArbitrary(o: {
  operations: readonly Operation[];
  unserved: ReadonlySet<string>;
  callers: readonly Caller[];
  badAuth: readonly Caller[];
  pool: Pool;
  /** Mutations left out (the suite leaves out `race`, whose outcome depends on timing). */
  exclude?: readonly Mutation[];
}): fc.Arbitrary<FuzzRequest> {
  const served = o.operations.filter((op) => op.kind === "operator" && !o.unserved.has(op.id));
  const unserved = o.operations.filter((op) => op.kind === "operator" && o.unserved.has(op.id));
  const pub = o.operations.filter((op) => op.kind === "public");
  const weighted: Array<{ arbitrary: fc.Arbitrary<Operation>; weight: number }> = [];
  if (served.length > 0) weighted.push({ arbitrary: fc.constantFrom(...served), weight: 6 });
  if (unserved.length > 0) weighted.push({ arbitrary: fc.constantFrom(...unserved), weight: 2 });
  if (pub.length > 0) weighted.push({ arbitrary: fc.constantFrom(...pub), weight: 1 });
  // The one public route with input of its own (host, forwarded URI, query) is drawn once more.
  const resolve = pub.find((op) => op.id === "GET /workspace/public/resolve");
  if (resolve) weighted.push({ arbitrary: fc.constant(resolve), weight: 1 });
  const mutations = MUTATIONS.filter((m) => m !== "valid" && !(o.exclude ?? []).includes(m));
  const mutation = fc.oneof(
    { arbitrary: fc.constant<Mutation>("valid"), weight: 4 },
    {
      arbitrary: fc.constantFrom<Mutation>(...mutations),
      weight: mutations.length,
    },
  );
  // The values of each operation, built once (schemas compile their patterns).
  const values = new Map<string, fc.Arbitrary<Values>>(
    o.operations.map((op) => [
      op.id,
      fc.record({
        pathValues: fc.tuple(
          ...op.pathParams.map((p) =>
            arbitraryFor(p.schema, { name: p.name, scope: op.path, pool: o.pool }).map(String),
          ),
        ),
        query: fc.tuple(
          ...op.queryParams.map((p) => {
            const arb = arbitraryFor(p.schema, { name: p.name, pool: o.pool });
            return p.required ? arb : fc.option(arb, { nil: undefined });
          }),
        ),
        body: op.body ? arbitraryFor(op.body, { pool: o.pool, hints: op.hints }) : fc.constant(undefined),
      }),
    ]),
  );
  return fc
    .record({
      op: fc.oneof(...weighted),
      caller: fc.constantFrom(...o.callers),
      badAuth: fc.constantFrom(...o.badAuth),
      mutation,
      pick: fc.nat(),
      size: fc.integer({ min: 10_000, max: 100_000 }),
      cursor: junkCursor,
      host: HOSTS,
      stranger: fc.constantFrom(...STRANGERS),
    })
    .chain((d) =>
      (values.get(d.op.id) as fc.Arbitrary<Values>).map((v) => build({ ...d, ...v }, o.operations)),
    );
}

/** A body for an operation, for probes: the first valid sample of its schema. */
export function sampleBody(op: Operation, seed: number): unknown {
  if (!op.body) return undefined;
  return fc.sample(arbitraryFor(op.body, { hints: op.hints }), { seed, numRuns: 1 })[0];
}

/** Path parameters for an operation, for probes: valid samples. */
export function samplePath(op: Operation, seed: number, pool?: Pool): string {
  const values = op.pathParams.map(
    (p) =>
      fc.sample(arbitraryFor(p.schema, { name: p.name, ...(pool ? { pool } : {}) }).map(String), {
        seed,
        numRuns: 1,
      })[0] ?? "x",
  );
  let i = 0;
  return op.path.replace(/\{(\w+)\}/g, () => encodeURIComponent(values[i++] ?? "x"));
}
