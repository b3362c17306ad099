/**
 * The fuzzer of issue 8 point 12, shared by `make fuzz` (scripts/fuzz.ts) and the short CI run
 * (test/fuzz.test.ts). Requests are generated from the gateway's own OpenAPI description (every operator
 * route) plus the public routes, valid and mutated (types, sizes, encodings, NUL, lone surrogates,
 * nesting, unknown fields, numbers out of range, bad cursors, wrong media types and methods), for every
 * kind of caller. Generation is fast-check's, from one seed, so a run can be repeated exactly.
 *
 * A request fails the run when it is answered 5xx (other than a 503 problem naming a service that does
 * not serve the route yet), when it takes longer than the hang limit, or when an error answer is not an
 * RFC 9457 problem document.
 */
import { request } from "node:http";

import fc from "fast-check";

export interface Caller {
  readonly name: string;
  readonly headers: Readonly<Record<string, string>>;
}

export interface FuzzRequest {
  readonly operation: string;
  readonly mutation: string;
  readonly caller: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

export interface Outcome {
  readonly request: FuzzRequest;
  readonly status: number;
  readonly contentType: string;
  readonly ms: number;
  readonly body: string;
  readonly failure?: string;
}

export interface FuzzReport {
  readonly seed: number;
  readonly sent: number;
  readonly seconds: number;
  readonly byStatus: Record<string, number>;
  readonly byMutation: Record<string, number>;
  readonly byCaller: Record<string, number>;
  readonly byGroup: Record<string, number>;
  readonly documented503: number;
  readonly serverErrors: number;
  readonly hangs: number;
  readonly notProblems: number;
  readonly slowest: { ms: number; request: FuzzRequest } | undefined;
  readonly failures: Outcome[];
}

type Schema = Record<string, unknown>;
interface Operation {
  readonly id: string;
  readonly method: string;
  readonly path: string;
  readonly pathParams: ReadonlyArray<{ name: string; schema: Schema }>;
  readonly queryParams: ReadonlyArray<{ name: string; schema: Schema; required: boolean }>;
  readonly body?: Schema;
  readonly public?: boolean;
}

/** A fast-check arbitrary of values valid for a JSON Schema (the subset TypeBox emits). */
export function arbitraryFor(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (schema === undefined) return fc.jsonValue({ maxDepth: 2 });
  if (Array.isArray(schema.anyOf))
    return fc.oneof(...(schema.anyOf as Schema[]).map((s) => arbitraryFor(s, depth)));
  if ("const" in schema) return fc.constant(schema.const);
  switch (schema.type) {
    case "null":
      return fc.constant(null);
    case "boolean":
      return fc.boolean();
    case "integer":
    case "number":
      return fc.integer({
        min: typeof schema.minimum === "number" ? schema.minimum : -1_000,
        max: typeof schema.maximum === "number" ? schema.maximum : 1_000,
      });
    case "string": {
      if (schema.format === "uuid") return fc.uuid();
      if (schema.format === "email") return fc.emailAddress();
      if (schema.format === "date-time") return fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
      const min = typeof schema.minLength === "number" ? schema.minLength : 0;
      const max = Math.max(min, Math.min(typeof schema.maxLength === "number" ? schema.maxLength : 60, 60));
      if (typeof schema.pattern === "string") {
        const pattern = new RegExp(schema.pattern);
        return fc
          .stringMatching(pattern)
          .filter(
            (s) =>
              s.length >= min && s.length <= (typeof schema.maxLength === "number" ? schema.maxLength : 1e9),
          );
      }
      return fc.string({ minLength: min, maxLength: max });
    }
    case "array": {
      const items = arbitraryFor(schema.items as Schema | undefined, depth + 1);
      const maxLength = Math.min(typeof schema.maxItems === "number" ? schema.maxItems : 5, 5);
      return schema.uniqueItems
        ? fc.uniqueArray(items, { maxLength, selector: (v) => JSON.stringify(v) })
        : fc.array(items, { maxLength });
    }
    case "object": {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = new Set((schema.required ?? []) as string[]);
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, s] of Object.entries(properties)) record[name] = arbitraryFor(s, depth + 1);
      return fc.record(record, { requiredKeys: [...required].filter((k) => k in record) });
    }
    default:
      return depth > 2 ? fc.constant(null) : fc.jsonValue({ maxDepth: 2 });
  }
}

/** The operations of an OpenAPI description, plus the public routes it leaves out (spec 4.1). */
export function operationsOf(openapi: { paths: Record<string, Record<string, Schema>> }): Operation[] {
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(openapi.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const params = (op.parameters ?? []) as Array<{
        name: string;
        in: string;
        required: boolean;
        schema: Schema;
      }>;
      const body = (op.requestBody as { content?: Record<string, { schema: Schema }> } | undefined)
        ?.content?.["application/json"]?.schema;
      out.push({
        id: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === "path").map((p) => ({ name: p.name, schema: p.schema })),
        queryParams: params
          .filter((p) => p.in === "query")
          .map((p) => ({ name: p.name, schema: p.schema, required: p.required })),
        ...(body ? { body } : {}),
      });
    }
  }
  const str = { type: "string", maxLength: 63 };
  out.push(
    {
      id: "GET /workspace/public/resolve",
      method: "GET",
      path: "/workspace/public/resolve",
      pathParams: [],
      queryParams: [{ name: "workspaceKey", schema: str, required: false }],
      public: true,
    },
    { id: "GET /health", method: "GET", path: "/health", pathParams: [], queryParams: [], public: true },
    { id: "GET /ready", method: "GET", path: "/ready", pathParams: [], queryParams: [], public: true },
    {
      id: "GET /openapi.json",
      method: "GET",
      path: "/openapi.json",
      pathParams: [],
      queryParams: [],
      public: true,
    },
    {
      id: "GET /.well-known/jwks.json",
      method: "GET",
      path: "/.well-known/jwks.json",
      pathParams: [],
      queryParams: [],
      public: true,
    },
    {
      id: "POST /api/auth/login",
      method: "POST",
      path: "/api/auth/login",
      pathParams: [],
      queryParams: [],
      body: {
        type: "object",
        properties: {
          username: { type: "string", maxLength: 100 },
          password: { type: "string", minLength: 1, maxLength: 200 },
          workspaceKey: { anyOf: [{ type: "string", maxLength: 63 }, { type: "null" }] },
        },
        required: ["password"],
      },
      public: true,
    },
  );
  return out;
}

const MUTATIONS = [
  "valid",
  "valid",
  "valid",
  "wrong-type",
  "huge-string",
  "nul",
  "lone-surrogate",
  "deep-nesting",
  "unknown-fields",
  "numbers",
  "bad-cursor",
  "bad-encoding",
  "long-segment",
  "long-query",
  "media-type",
  "bad-json",
  "method",
  "host",
] as const;
type Mutation = (typeof MUTATIONS)[number];

const junkCursor = fc.oneof(
  fc
    .base64String({ maxLength: 80 })
    .map((s) => s.replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "")),
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
  fc.constantFrom(
    Buffer.from("u:\u0000").toString("base64url"),
    Buffer.from("j:99999999999999999999").toString("base64url"),
    Buffer.from(JSON.stringify(["jobs", "9223372036854775808"])).toString("base64url"),
    Buffer.from(JSON.stringify(["webhooks", "+275760-09-13T00:00:00.000Z", "x"])).toString("base64url"),
    Buffer.from(JSON.stringify({ at: "2026-99-99", id: "x" })).toString("base64url"),
    "%00",
    "a".repeat(400),
  ),
);

function replaceOne(value: unknown, replacement: (old: unknown) => unknown, pick: number): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return replacement(value);
  const keys = Object.keys(value);
  if (keys.length === 0) return { field: replacement("") };
  const key = keys[pick % keys.length] as string;
  return { ...value, [key]: replacement((value as Record<string, unknown>)[key]) };
}

/** The arbitrary of one request: an operation, a caller, a mutation and the values it needs. */
export function requestArbitrary(
  operations: readonly Operation[],
  callers: readonly Caller[],
): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      op: fc.constantFrom(...operations),
      caller: fc.constantFrom(...callers),
      mutation: fc.constantFrom<Mutation>(...MUTATIONS),
      pick: fc.nat(),
      size: fc.integer({ min: 10_000, max: 100_000 }),
      cursor: junkCursor,
      host: fc.oneof(
        fc.constantFrom(
          "localhost",
          "127.0.0.1",
          "LOCALHOST.",
          "xn--nxasmq6b",
          "a".repeat(300),
          "[::1]",
          "host:99999",
        ),
        fc.domain(),
        fc.string({ maxLength: 40 }).map((s) => s.replace(/[\r\n]/g, "")),
      ),
    })
    .chain(({ op, caller, mutation, pick, size, cursor, host }) =>
      fc
        .record({
          pathValues: fc.tuple(...op.pathParams.map((p) => arbitraryFor(p.schema).map(String))),
          query: fc.tuple(
            ...op.queryParams.map((p) =>
              p.required ? arbitraryFor(p.schema) : fc.option(arbitraryFor(p.schema), { nil: undefined }),
            ),
          ),
          body: op.body ? arbitraryFor(op.body) : fc.constant(undefined),
          stranger: fc.constantFrom<unknown>(12345, -1, true, null, [], {}, "text", 1.5),
        })
        .map(({ pathValues, query, body, stranger }) =>
          build(op, caller, mutation, { pathValues, query, body, stranger, pick, size, cursor, host }),
        ),
    );
}

function build(
  op: Operation,
  caller: Caller,
  mutation: Mutation,
  v: {
    pathValues: string[];
    query: unknown[];
    body: unknown;
    stranger: unknown;
    pick: number;
    size: number;
    cursor: string;
    host: string;
  },
): FuzzRequest {
  const segments = [...v.pathValues].map((s) => encodeURIComponent(s));
  const queryPairs: Array<[string, string]> = [];
  op.queryParams.forEach((p, i) => {
    const value = v.query[i];
    if (value !== undefined)
      queryPairs.push([p.name, typeof value === "string" ? value : JSON.stringify(value)]);
  });
  let body: unknown = v.body;
  let rawBody: string | undefined;
  let method = op.method;
  let contentType = "application/json";
  let rawQuery: string | undefined;
  const headers: Record<string, string> = { ...caller.headers, host: "localhost" };

  switch (mutation) {
    case "valid":
      break;
    case "wrong-type":
      if (body !== undefined) body = replaceOne(body, () => v.stranger, v.pick);
      else if (queryPairs.length > 0)
        (queryPairs[v.pick % queryPairs.length] as [string, string])[1] = "[object]";
      else if (segments.length > 0) segments[v.pick % segments.length] = "12345";
      break;
    case "huge-string":
      if (body !== undefined) body = replaceOne(body, () => "x".repeat(v.size), v.pick);
      else if (queryPairs.length > 0)
        (queryPairs[v.pick % queryPairs.length] as [string, string])[1] = "x".repeat(5_000);
      else if (segments.length > 0) segments[v.pick % segments.length] = "x".repeat(99);
      break;
    case "nul":
      if (body !== undefined)
        body = replaceOne(body, (old) => `${typeof old === "string" ? old : "a"}\u0000b`, v.pick);
      else if (queryPairs.length > 0)
        (queryPairs[v.pick % queryPairs.length] as [string, string])[1] = "\u0000";
      else if (segments.length > 0) segments[v.pick % segments.length] = "%00";
      else queryPairs.push(["workspaceKey", "\u0000"]);
      break;
    case "lone-surrogate":
      if (body !== undefined) body = replaceOne(body, () => "a\ud800b", v.pick);
      else queryPairs.push([op.queryParams[0]?.name ?? "workspaceKey", "a\ud800b"]);
      break;
    case "deep-nesting": {
      const depth = 10_000;
      rawBody = `{"a":${"[".repeat(depth)}${"]".repeat(depth)}}`;
      if (method === "GET" || method === "DELETE") queryPairs.push(["q", "[".repeat(2_000)]);
      break;
    }
    case "unknown-fields":
      if (typeof body === "object" && body !== null && !Array.isArray(body)) {
        rawBody = JSON.stringify({ ...body, unexpected: 1 }).replace(
          /^\{/,
          '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},',
        );
      } else queryPairs.push(["unexpected", "1"]);
      break;
    case "numbers":
      if (body !== undefined) {
        rawBody = JSON.stringify(replaceOne(body, () => "__NUMBER__", v.pick)).replace(
          '"__NUMBER__"',
          ["1e309", "-1", "9223372036854775808", "-0", "1.5e-400"][v.pick % 5] as string,
        );
      } else
        queryPairs.push([
          "limit",
          ["1e309", "-1", "9223372036854775808", "NaN", "0x10"][v.pick % 5] as string,
        ]);
      break;
    case "bad-cursor":
      queryPairs.push(["cursor", v.cursor]);
      break;
    case "bad-encoding":
      rawQuery = ["%FF%FE", "%", "%zz", "a=%E0%A4%A", "workspaceKey=%C0%80"][v.pick % 5];
      if (segments.length > 0)
        segments[v.pick % segments.length] = ["%FF%FE", "%", "%zz"][v.pick % 3] as string;
      break;
    case "long-segment":
      if (segments.length > 0) segments[v.pick % segments.length] = "a".repeat(5_000);
      else rawQuery = `x=${"a".repeat(5_000)}`;
      break;
    case "long-query":
      rawQuery = `q=${"a".repeat(70_000)}`;
      break;
    case "media-type":
      contentType = [
        "text/plain",
        "application/xml",
        "application/json; charset=latin1",
        "multipart/form-data",
      ][v.pick % 4] as string;
      if (body === undefined) body = {};
      break;
    case "bad-json":
      rawBody = ["{not json", "", "[]", "null", '"str"', "{", '{"a":1}}', "\u0000"][v.pick % 8];
      break;
    case "method":
      method = ["PATCH", "DELETE", "PUT", "POST", "OPTIONS", "GET"].filter((m) => m !== op.method)[
        v.pick % 5
      ] as string;
      break;
    case "host":
      headers.host = v.host;
      headers["x-forwarded-host"] = v.host;
      headers["x-forwarded-uri"] = ["/", "//x", "/%00", "/a/../b", "http://evil/"][v.pick % 5] as string;
      break;
  }

  let i = 0;
  const path = op.path.replace(/\{(\w+)\}/g, () => segments[i++] ?? "x");
  const query = rawQuery ?? new URLSearchParams(queryPairs).toString();
  const sendsBody = rawBody !== undefined || (body !== undefined && method !== "GET" && method !== "HEAD");
  return {
    operation: op.id,
    mutation,
    caller: caller.name,
    method,
    path: query ? `${path}?${query}` : path,
    headers: sendsBody ? { ...headers, "content-type": contentType } : headers,
    ...(sendsBody ? { body: rawBody ?? JSON.stringify(body) } : {}),
  };
}

/** One request with a hard deadline; a response slower than `hangMs` counts as a hang. */
function send(base: string, r: FuzzRequest, hangMs: number): Promise<Omit<Outcome, "request" | "failure">> {
  const started = Date.now();
  const url = new URL(base);
  return new Promise((resolve) => {
    let done = false;
    const finish = (status: number, contentType: string, body: string) => {
      if (done) return;
      done = true;
      resolve({ status, contentType, body, ms: Date.now() - started });
    };
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: r.method,
        path: r.path,
        headers: r.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          size += c.length;
          if (size < 64_000) chunks.push(c);
        });
        res.on("end", () =>
          finish(
            res.statusCode ?? 0,
            String(res.headers["content-type"] ?? ""),
            Buffer.concat(chunks).toString(),
          ),
        );
        res.on("error", () => finish(res.statusCode ?? 0, "", ""));
      },
    );
    req.setTimeout(hangMs, () => {
      req.destroy();
      finish(-1, "", "no answer within the hang limit");
    });
    req.on("error", (error) => finish(0, "", `connection error: ${error.message}`));
    req.end(r.body);
  });
}

function judge(r: FuzzRequest, o: Omit<Outcome, "request" | "failure">, hangMs: number): string | undefined {
  if (o.status === -1 || o.ms > hangMs) return `hang (${o.ms} ms)`;
  if (o.status === 0) return o.body;
  if (o.status >= 500) {
    const notYetServed =
      o.status === 503 &&
      o.contentType.startsWith("application/problem+json") &&
      /SVC_SERVICE_UNAVAILABLE/.test(o.body);
    if (!notYetServed) return `server error ${o.status}`;
  }
  if (o.status >= 400 && r.method !== "HEAD" && !o.contentType.startsWith("application/problem+json")) {
    return `error ${o.status} is not a problem document (${o.contentType || "no content type"})`;
  }
  return undefined;
}

export interface FuzzOptions {
  readonly base: string;
  readonly openapi: { paths: Record<string, Record<string, Schema>> };
  readonly callers: readonly Caller[];
  readonly seed: number;
  readonly requests: number;
  readonly seconds: number;
  readonly concurrency?: number;
  readonly hangMs?: number;
}

export async function runFuzz(o: FuzzOptions): Promise<FuzzReport> {
  const hangMs = o.hangMs ?? 5_000;
  const requests = fc.sample(requestArbitrary(operationsOf(o.openapi), o.callers), {
    seed: o.seed,
    numRuns: o.requests,
  });
  const deadline = Date.now() + o.seconds * 1_000;
  const started = Date.now();
  const outcomes: Outcome[] = [];
  let next = 0;
  const worker = async () => {
    while (next < requests.length && Date.now() < deadline) {
      const r = requests[next++] as FuzzRequest;
      const answer = await send(o.base, r, hangMs);
      const failure = judge(r, answer, hangMs);
      outcomes.push({ request: r, ...answer, ...(failure ? { failure } : {}) });
    }
  };
  await Promise.all(Array.from({ length: o.concurrency ?? 8 }, worker));
  const count = (key: (x: Outcome) => string) =>
    outcomes.reduce<Record<string, number>>((acc, x) => {
      acc[key(x)] = (acc[key(x)] ?? 0) + 1;
      return acc;
    }, {});
  const slowest = outcomes.reduce<Outcome | undefined>(
    (a, b) => (a === undefined || b.ms > a.ms ? b : a),
    undefined,
  );
  const failures = outcomes.filter((x) => x.failure !== undefined);
  return {
    seed: o.seed,
    sent: outcomes.length,
    seconds: (Date.now() - started) / 1_000,
    byStatus: count((x) => String(x.status)),
    byMutation: count((x) => x.request.mutation),
    byCaller: count((x) => x.request.caller),
    byGroup: count((x) => (x.request.operation.split(" ")[1] ?? "").split("/").slice(0, 3).join("/")),
    documented503: outcomes.filter((x) => x.status === 503 && x.failure === undefined).length,
    serverErrors: failures.filter((x) => x.failure?.startsWith("server error")).length,
    hangs: failures.filter((x) => x.failure?.startsWith("hang")).length,
    notProblems: failures.filter((x) => x.failure?.includes("not a problem")).length,
    slowest: slowest ? { ms: slowest.ms, request: slowest.request } : undefined,
    failures,
  };
}

const line = (r: FuzzRequest) =>
  `${r.method} ${r.path.length > 160 ? `${r.path.slice(0, 160)}…(${r.path.length})` : r.path} as ${r.caller} [${r.mutation}]` +
  (r.body === undefined
    ? ""
    : ` body ${JSON.stringify(r.body.slice(0, 120))}${r.body.length > 120 ? `…(${r.body.length})` : ""}`);

export function formatReport(report: FuzzReport): string {
  const table = (title: string, counts: Record<string, number>) =>
    `${title}\n${Object.entries(counts)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `  ${k.padEnd(44)}${String(n).padStart(7)}`)
      .join("\n")}`;
  const out = [
    `fuzz: seed ${report.seed}, ${report.sent} requests in ${report.seconds.toFixed(1)} s (${(report.sent / report.seconds).toFixed(0)}/s)`,
    table("by status", report.byStatus),
    table("by mutation", report.byMutation),
    table("by caller", report.byCaller),
    table("by route group", report.byGroup),
    `503 for routes no service serves yet (documented): ${report.documented503}`,
    `slowest: ${report.slowest ? `${report.slowest.ms} ms ${line(report.slowest.request)}` : "-"}`,
    `5xx (undocumented): ${report.serverErrors}   hangs over the limit: ${report.hangs}   error answers that are not problem documents: ${report.notProblems}`,
  ];
  const distinct = new Map<string, Outcome>();
  for (const f of report.failures)
    distinct.set(`${f.failure} ${f.request.operation} ${f.request.mutation}`, f);
  for (const f of [...distinct.values()].slice(0, 40)) {
    out.push(`FAIL ${f.failure}: ${line(f.request)} → ${f.status} ${f.body.slice(0, 200)}`);
  }
  out.push(
    report.failures.length === 0 ? "fuzz: passed" : `fuzz: FAILED (${report.failures.length} requests)`,
  );
  return out.join("\n");
}

/** The kinds of caller every operation is tried with. */
export async function fuzzCallers(
  sign: (o: {
    scope?: "platform" | "workspace";
    workspaceKey?: string;
    permissions?: string[];
    roles?: string[];
    expiresIn?: number;
  }) => Promise<string>,
  apiKey: string,
  allKeys: readonly string[],
): Promise<Caller[]> {
  const bearer = async (o: Parameters<typeof sign>[0]) => ({ authorization: `Bearer ${await sign(o)}` });
  return [
    { name: "anonymous", headers: {} },
    { name: "garbage token", headers: { authorization: "Bearer not.a.token" } },
    {
      name: "expired token",
      headers: await bearer({ scope: "platform", roles: ["superadmin"], expiresIn: -120 }),
    },
    { name: "superadmin", headers: await bearer({ scope: "platform", roles: ["superadmin"] }) },
    { name: "platform, every key", headers: await bearer({ scope: "platform", permissions: [...allKeys] }) },
    { name: "platform, no keys", headers: await bearer({ scope: "platform" }) },
    {
      name: "workspace session",
      headers: await bearer({ scope: "workspace", workspaceKey: "default", permissions: [...allKeys] }),
    },
    { name: "no scope claim", headers: await bearer({ permissions: [...allKeys] }) },
    { name: "break-glass API key", headers: { "x-svc-api-key": apiKey } },
  ];
}
