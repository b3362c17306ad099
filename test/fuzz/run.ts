/**
 * The fuzz runner, shared by `make fuzz` (scripts/fuzz.ts) and the short run in the
 * suite (test/fuzz.test.ts): probes which operator routes a service serves, harvests identifiers that
 * exist (so valid requests reach the handlers), sends generated requests with bounded concurrency and a
 * hang limit, judges every answer and gathers the figures.
 *
 * A request fails the run when:
 * - `5xx`: it is answered 5xx, except a 503 problem (`SVC_SERVICE_UNAVAILABLE`) on a route the probe
 *   found no service serving yet (the catalogue documents such routes as answering 503);
 * - `hang`: no complete answer within the hang limit (5 s);
 * - `no-answer`: the connection closed without an answer;
 * - `auth-bypass`: a caller that must be refused (anonymous, bad credentials, missing key, another
 *   workspace, platform-only route) got a 2xx;
 * - `contract`: a route whose contract is a 200 whatever the input (the public resolve route) answered
 *   otherwise to input the framework lets through;
 * - `not-problem`: an error answer is not an RFC 9457 problem document (`application/problem+json` with
 *   `type`, `title` and the same `status`);
 * - `leak`: an error answer shows internals (stack frames, file paths, SQL error texts);
 * - `bad-json-answer`: a JSON answer that does not parse.
 */
import { request } from "node:http";
import { connect } from "node:net";

import fc from "fast-check";

import type { Caller } from "./callers.js";
import {
  type FuzzRequest,
  type Mutation,
  type OpenApi,
  type Operation,
  operationsOf,
  requestArbitrary,
  sampleBody,
  samplePath,
} from "./generate.js";
import type { Pool } from "./schema.js";

export const CATEGORIES = [
  "5xx",
  "hang",
  "no-answer",
  "auth-bypass",
  "contract",
  "not-problem",
  "leak",
  "bad-json-answer",
] as const;
export type Category = (typeof CATEGORIES)[number];

export interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  readonly ms: number;
  readonly truncated: boolean;
  /** Set when the client itself refused to send the request (e.g. a header Node will not write). */
  readonly notSent?: string;
}

export interface Outcome {
  readonly request: FuzzRequest;
  readonly answer: Answer;
  readonly failure?: Category;
}

const MAX_BODY = 256 * 1024;

/** One request with a hard deadline; no complete answer within `hangMs` is status -1. */
export function send(base: string, r: FuzzRequest, hangMs: number): Promise<Answer> {
  return r.raw === undefined ? sendHttp(base, r, hangMs) : sendRaw(base, r.raw, hangMs);
}

function sendHttp(base: string, r: FuzzRequest, hangMs: number): Promise<Answer> {
  const started = Date.now();
  const url = new URL(base);
  return new Promise((resolve) => {
    let done = false;
    const finish = (a: Omit<Answer, "ms">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...a, ms: Date.now() - started });
    };
    const timer = setTimeout(() => {
      req?.destroy();
      finish({
        status: -1,
        contentType: "",
        body: "no complete answer within the hang limit",
        truncated: false,
      });
    }, hangMs);
    let req: ReturnType<typeof request> | undefined;
    try {
      req = request(
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
            if (size <= MAX_BODY) chunks.push(c);
          });
          const answer = () => ({
            status: res.statusCode ?? 0,
            contentType: String(res.headers["content-type"] ?? ""),
            body: Buffer.concat(chunks).toString(),
            truncated: size > MAX_BODY,
          });
          res.on("end", () => finish(answer()));
          res.on("error", () => finish(answer()));
        },
      );
    } catch (error) {
      finish({ status: 0, contentType: "", body: "", truncated: false, notSent: (error as Error).message });
      return;
    }
    req.on("error", (error) => {
      // The server may answer (413, 400) and close before the whole body is written: not a failure.
      finish({ status: 0, contentType: "", body: `connection error: ${error.message}`, truncated: false });
    });
    req.end(r.body === undefined ? undefined : Buffer.from(r.body, r.bodyEncoding ?? "utf8"));
  });
}

/** A raw request on a plain socket; the answer is read up to its Content-Length, or to the close. */
function sendRaw(base: string, raw: string, hangMs: number): Promise<Answer> {
  const started = Date.now();
  const url = new URL(base);
  return new Promise((resolve) => {
    let buffer = Buffer.alloc(0);
    let done = false;
    const parse = (complete: boolean): Omit<Answer, "ms"> | undefined => {
      const end = buffer.indexOf("\r\n\r\n");
      if (end === -1)
        return complete ? { status: 0, contentType: "", body: "", truncated: false } : undefined;
      const head = buffer.subarray(0, end).toString("latin1");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      const header = (name: string) => new RegExp(`\r\n${name}:\\s*([^\r\n]*)`, "i").exec(head)?.[1];
      const length = header("content-length");
      const body = buffer.subarray(end + 4);
      if (length !== undefined && body.length < Number(length) && !complete) return undefined;
      if (length === undefined && !complete) {
        if (!/chunked/i.test(header("transfer-encoding") ?? "") || !body.includes("0\r\n\r\n")) {
          if (status === 204 || status === 304)
            return { status, contentType: "", body: "", truncated: false };
          return undefined;
        }
      }
      return {
        status,
        contentType: header("content-type") ?? "",
        body: body.subarray(0, length === undefined ? undefined : Number(length)).toString(),
        truncated: false,
      };
    };
    const finish = (a: Omit<Answer, "ms">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...a, ms: Date.now() - started });
    };
    const timer = setTimeout(
      () => finish(parse(true) ?? { status: -1, contentType: "", body: "", truncated: false }),
      hangMs,
    );
    const socket = connect({ host: url.hostname, port: Number(url.port) }, () => {
      socket.write(Buffer.from(raw, "latin1"));
    });
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const answer = parse(false);
      if (answer) finish(answer);
    });
    socket.on("close", () =>
      finish(parse(true) ?? { status: 0, contentType: "", body: "", truncated: false }),
    );
    socket.on("error", () => undefined);
  });
}

const LEAKS = [
  /(\n|\\n)\s+at \S.*[(:]\d+/,
  /node_modules/,
  /\/(work|home|app|srv|opt|usr\/src)\/[\w./-]*\.[cm]?[jt]s\b/,
  /\.[cm]?[jt]s:\d+:\d+/,
  /duplicate key value|violates (unique|foreign key|check|not-null) constraint|syntax error at or near|invalid input syntax for|relation "[^"]+" does not exist|out of range for type|invalid byte sequence for encoding/i,
  /\b(TypeError|ReferenceError|RangeError): /,
  /Cannot read propert|is not a function|Maximum call stack/,
  /ECONNREFUSED|EADDRINUSE|NatsError|TimeoutError/,
];

function problemOf(
  a: Answer,
): { type?: unknown; title?: unknown; status?: unknown; code?: unknown } | undefined {
  if (!a.contentType.startsWith("application/problem+json")) return undefined;
  try {
    const p = JSON.parse(a.body) as unknown;
    return p !== null && typeof p === "object" ? p : undefined;
  } catch {
    return undefined;
  }
}

/** The failure category of an answer, if any. */
export function judge(
  r: FuzzRequest,
  a: Answer,
  hangMs: number,
  unserved: ReadonlySet<string>,
): Category | undefined {
  if (a.notSent !== undefined) return undefined;
  if (a.status === -1 || a.ms > hangMs) return "hang";
  if (a.status === 0) return "no-answer";
  const problem = problemOf(a);
  if (a.status >= 500) {
    // A HEAD answer has no body: its content type has to do.
    const noResponder =
      problem?.code === "SVC_SERVICE_UNAVAILABLE" ||
      (r.method === "HEAD" && a.contentType.startsWith("application/problem+json"));
    const documented = a.status === 503 && noResponder && unserved.has(r.target);
    if (!documented) return "5xx";
  }
  if (r.mustDeny && a.status >= 200 && a.status < 300) return "auth-bypass";
  if (r.mustAnswer200 !== undefined && a.status !== 200) return "contract";
  if (a.status >= 400 && r.method !== "HEAD") {
    if (
      problem === undefined ||
      typeof problem.type !== "string" ||
      typeof problem.title !== "string" ||
      problem.status !== a.status
    )
      return "not-problem";
    // The request's own path is echoed (`instance`, `detail`): it is not a leak.
    const [path = "", query = ""] = r.path.split("?");
    let body = a.body.split(path).join("");
    if (query) body = body.split(query).join("");
    if (LEAKS.some((re) => re.test(body))) return "leak";
  }
  if (/json/.test(a.contentType) && r.method !== "HEAD" && !a.truncated && a.body.length > 0) {
    try {
      JSON.parse(a.body);
    } catch {
      return "bad-json-answer";
    }
  }
  return undefined;
}

/** Runs `fn` over `items`, `concurrency` at a time. */
async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

/**
 * Which operator routes no service serves yet: each asked once, validly, by `caller` (who holds every
 * key); a 503 `SVC_SERVICE_UNAVAILABLE` problem means no responder, as conformance.test.ts tells them.
 */
export async function probeUnserved(
  base: string,
  operations: readonly Operation[],
  caller: Caller,
  hangMs: number,
  record: (o: Outcome) => void,
): Promise<Set<string>> {
  const unserved = new Set<string>();
  await pool(
    operations.filter((op) => op.kind === "operator"),
    8,
    async (op) => {
      for (let attempt = 1; attempt <= 3; attempt++) {
        const body = op.method === "GET" || op.method === "DELETE" ? undefined : sampleBody(op, attempt);
        const r: FuzzRequest = {
          operation: op.id,
          target: op.id,
          group: op.group,
          kind: op.kind,
          mutation: "valid",
          variant: "probe",
          caller: caller.name,
          method: op.method,
          path: samplePath(op, attempt),
          headers: {
            host: "localhost",
            ...caller.headers,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          mustDeny: false,
        };
        const answer = await send(base, r, hangMs);
        const noResponder = answer.status === 503 && problemOf(answer)?.code === "SVC_SERVICE_UNAVAILABLE";
        if (noResponder) unserved.add(op.id);
        const failure = noResponder ? undefined : judge(r, answer, hangMs, unserved);
        record({ request: r, answer, ...(failure ? { failure } : {}) });
        if (answer.status !== 400) break;
      }
    },
  );
  return unserved;
}

/**
 * Values that exist in the stack, by field name: every list route (no path parameter) read as `caller`,
 * and, for each path parameter, the `id`, `key`, `name` and `userId` of the items its parent lists.
 */
export async function harvest(
  base: string,
  operations: readonly Operation[],
  unserved: ReadonlySet<string>,
  caller: Caller,
  constants: Pool,
): Promise<Pool> {
  const found = new Map<string, Set<string>>();
  const add = (name: string, value: string) => {
    if (value.length === 0 || value.length > 200) return;
    const set = found.get(name) ?? new Set<string>();
    if (set.size < 40) set.add(value);
    found.set(name, set);
  };
  for (const [name, values] of Object.entries(constants)) for (const v of values) add(name, v);
  const walk = (value: unknown, name: string | undefined, into: (n: string, v: string) => void): void => {
    if (Array.isArray(value)) for (const v of value) walk(v, name, into);
    else if (value !== null && typeof value === "object")
      for (const [k, v] of Object.entries(value)) walk(v, k, into);
    else if (name !== undefined && (typeof value === "string" || typeof value === "number"))
      into(name, String(value));
  };
  const listings = new Map<string, unknown>();
  const read = async (op: Operation, path: string) => {
    const limit = op.queryParams.some((p) => p.name === "limit") ? "?limit=100" : "";
    const answer = await send(
      base,
      {
        operation: op.id,
        target: op.id,
        group: op.group,
        kind: op.kind,
        mutation: "valid",
        variant: "harvest",
        caller: caller.name,
        method: "GET",
        path: `${path}${limit}`,
        headers: { host: "localhost", ...caller.headers },
        mustDeny: false,
      },
      10_000,
    );
    if (answer.status !== 200) return;
    try {
      const value = JSON.parse(answer.body) as unknown;
      listings.set(op.path, value);
      walk(value, undefined, add);
    } catch {
      // not JSON: nothing to learn
    }
  };
  const reads = operations.filter(
    (op) => op.kind === "operator" && op.method === "GET" && !unserved.has(op.id),
  );
  // First what needs no parameter, then what the values found so far can address (its first value each).
  await pool(
    reads.filter((op) => op.pathParams.length === 0),
    4,
    (op) => read(op, op.path),
  );
  const addressable = reads.filter(
    (op) => op.pathParams.length > 0 && op.pathParams.every((p) => (found.get(p.name)?.size ?? 0) > 0),
  );
  await pool(addressable, 4, (op) =>
    read(
      op,
      op.path.replace(/\{(\w+)\}/g, (_m, name: string) =>
        encodeURIComponent([...(found.get(name) ?? [])][0] ?? "x"),
      ),
    ),
  );
  for (const op of operations) {
    for (const p of op.pathParams) {
      const parent = op.path.slice(0, op.path.indexOf(`/{${p.name}}`));
      const listing = listings.get(parent);
      if (listing === undefined) continue;
      walk(listing, undefined, (field, v) => {
        if (["id", "key", "name", "userId", p.name].includes(field)) {
          add(p.name, v);
          add(`${op.path}|${p.name}`, v);
        }
      });
    }
  }
  return Object.fromEntries([...found].map(([k, v]) => [k, [...v]]));
}

export interface FuzzOptions {
  readonly base: string;
  readonly openapi: OpenApi;
  readonly callers: readonly Caller[];
  readonly badAuth: readonly Caller[];
  /** A caller holding every key (superadmin): probes and harvests. */
  readonly operator: Caller;
  /** Values known to exist before the run (the seeded workspace, tenant, roles, demo operator). */
  readonly constants?: Pool;
  readonly seed: number;
  /** At most this many requests (probes and harvests not counted) … */
  readonly requests: number;
  /** … and at most this long. */
  readonly seconds: number;
  readonly concurrency?: number;
  /** An answer slower than this is a hang (default 5,000 ms). */
  readonly hangMs?: number;
  /** The pool of known values is harvested again before each round (default 4). */
  readonly rounds?: number;
  /** Mutations left out (e.g. `race`, whose outcome depends on timing, in the suite). */
  readonly exclude?: readonly Mutation[];
  readonly log?: (message: string) => void;
  /** Called with every outcome (probes and fuzzed requests), e.g. to write them all down. */
  readonly onOutcome?: (outcome: Outcome) => void;
}

export interface FuzzReport {
  readonly seed: number;
  readonly sent: number;
  readonly notSent: number;
  readonly seconds: number;
  readonly routes: { readonly operator: number; readonly unserved: number; readonly public: number };
  readonly unservedRoutes: readonly string[];
  readonly byStatus: Record<string, number>;
  readonly byMutation: Record<string, number>;
  readonly byCaller: Record<string, number>;
  readonly byGroup: Record<string, number>;
  /** 2xx answers of operator routes, by caller. */
  readonly successByCaller: Record<string, number>;
  /** Served operator routes that never answered 2xx (valid requests did not get through). */
  readonly servedWithout2xx: readonly string[];
  readonly documented503: number;
  readonly counts: Record<Category, number>;
  readonly latency: {
    readonly p50: number;
    readonly p95: number;
    readonly p99: number;
    readonly max: number;
  };
  readonly slowest: readonly Outcome[];
  readonly failures: readonly Outcome[];
}

const BATCH = 250;

export async function runFuzz(o: FuzzOptions): Promise<FuzzReport> {
  const hangMs = o.hangMs ?? 5_000;
  const rounds = Math.max(1, o.rounds ?? 4);
  const log = o.log ?? (() => undefined);
  const started = Date.now();
  const deadline = started + o.seconds * 1_000;
  const operations = operationsOf(o.openapi);
  const outcomes: Outcome[] = [];
  let notSent = 0;
  const record = (x: Outcome) => {
    o.onOutcome?.(x);
    if (x.answer.notSent !== undefined) notSent++;
    else outcomes.push(x);
  };

  const unserved = await probeUnserved(o.base, operations, o.operator, hangMs, record);
  const operatorCount = operations.filter((op) => op.kind === "operator").length;
  log(
    `${operatorCount} operator routes (${operatorCount - unserved.size} served, ${unserved.size} answering 503 until their service serves them), ` +
      `${operations.length - operatorCount} public routes`,
  );

  let sent = 0;
  for (let round = 0; round < rounds && sent < o.requests && Date.now() < deadline; round++) {
    const knownValues = await harvest(o.base, operations, unserved, o.operator, o.constants ?? {});
    const arbitrary = requestArbitrary({
      operations,
      unserved,
      callers: o.callers,
      badAuth: o.badAuth,
      pool: knownValues,
      ...(o.exclude ? { exclude: o.exclude } : {}),
    });
    const roundDeadline = Math.min(deadline, started + (o.seconds * 1_000 * (round + 1)) / rounds);
    const roundLimit = Math.min(o.requests, Math.ceil((o.requests * (round + 1)) / rounds));
    log(
      `round ${round + 1}/${rounds}: ${Object.values(knownValues).reduce((n, v) => n + v.length, 0)} known values`,
    );
    let queue: FuzzRequest[] = [];
    let batch = 0;
    const next = (): FuzzRequest | undefined => {
      if (sent >= roundLimit || Date.now() >= roundDeadline) return undefined;
      if (queue.length === 0) {
        // Batches keep memory bounded (bodies reach 1 MB) and are each drawn from a seed of their own.
        queue = fc.sample(arbitrary, { seed: o.seed + round * 1_000_003 + batch++ * 7_919, numRuns: BATCH });
      }
      sent++;
      return queue.shift();
    };
    await Promise.all(
      Array.from({ length: o.concurrency ?? 8 }, async () => {
        for (let r = next(); r !== undefined; r = next()) {
          const { companions = [], ...main } = r;
          const all: FuzzRequest[] = [main, ...companions];
          const answers = await Promise.all([
            send(o.base, main, hangMs),
            ...companions.map(async (c) => {
              await new Promise((resolve) => setTimeout(resolve, c.delayMs));
              return send(o.base, c, hangMs);
            }),
          ]);
          answers.forEach((answer, k) => {
            const request = all[k] as FuzzRequest;
            const failure = judge(request, answer, hangMs, unserved);
            record({ request, answer, ...(failure ? { failure } : {}) });
          });
        }
      }),
    );
  }

  const count = (key: (x: Outcome) => string | undefined, from: readonly Outcome[] = outcomes) =>
    from.reduce<Record<string, number>>((acc, x) => {
      const k = key(x);
      if (k !== undefined) acc[k] = (acc[k] ?? 0) + 1;
      return acc;
    }, {});
  const callerKind = (name: string) =>
    name.startsWith("bad auth") ? "bad auth (malformed credentials)" : name;
  const times = outcomes.map((x) => x.answer.ms).sort((a, b) => a - b);
  const pct = (p: number) => times[Math.min(times.length - 1, Math.floor((times.length * p) / 100))] ?? 0;
  const failures = outcomes.filter((x) => x.failure !== undefined);
  const counts = Object.fromEntries(
    CATEGORIES.map((c) => [c, failures.filter((x) => x.failure === c).length]),
  ) as Record<Category, number>;
  return {
    seed: o.seed,
    sent: outcomes.length,
    notSent,
    seconds: (Date.now() - started) / 1_000,
    routes: { operator: operatorCount, unserved: unserved.size, public: operations.length - operatorCount },
    unservedRoutes: [...unserved].sort(),
    byStatus: count((x) => String(x.answer.status)),
    byMutation: count((x) => x.request.mutation),
    byCaller: count((x) => callerKind(x.request.caller)),
    byGroup: count((x) => x.request.group),
    successByCaller: count((x) =>
      x.request.kind === "operator" && x.answer.status >= 200 && x.answer.status < 300
        ? callerKind(x.request.caller)
        : undefined,
    ),
    servedWithout2xx: operations
      .filter((op) => op.kind === "operator" && !unserved.has(op.id))
      .map((op) => op.id)
      .filter(
        (id) =>
          !outcomes.some((x) => x.request.target === id && x.answer.status >= 200 && x.answer.status < 300),
      )
      .sort(),
    documented503: outcomes.filter((x) => x.answer.status === 503 && x.failure === undefined).length,
    counts,
    latency: { p50: pct(50), p95: pct(95), p99: pct(99), max: times.at(-1) ?? 0 },
    slowest: [...outcomes].sort((a, b) => b.answer.ms - a.answer.ms).slice(0, 3),
    failures,
  };
}

const excerpt = (s: string, n: number) =>
  `${JSON.stringify(s.slice(0, n))}${s.length > n ? `…(${s.length} chars)` : ""}`;

/** One line that reproduces a request: method, path, caller, mutation, headers beyond the caller's, body. */
export function describeRequest(r: FuzzRequest): string {
  const path = r.path.length > 160 ? `${r.path.slice(0, 160)}…(${r.path.length} chars)` : r.path;
  const extra = Object.entries(r.headers)
    .filter(
      ([k, v]) =>
        !["authorization", "x-svc-api-key", "content-type"].includes(k) &&
        !(k === "host" && v === "localhost"),
    )
    .map(([k, v]) => `${k}: ${v.length > 60 ? `${v.slice(0, 60)}…(${v.length})` : v}`);
  return (
    `${r.method} ${path} as ${r.caller} [${r.mutation}${r.variant ? `: ${r.variant}` : ""}]` +
    (r.headers["content-type"] ? ` content-type ${r.headers["content-type"]}` : "") +
    (extra.length > 0 ? ` headers {${extra.join("; ")}}` : "") +
    (r.body === undefined ? "" : ` body ${excerpt(r.body, 120)}`) +
    (r.raw === undefined
      ? ""
      : ` raw ${excerpt(r.raw.replace(/(authorization|x-svc-api-key): [^\r\n]*/gi, "$1: …"), 160)}`)
  );
}

/**
 * Distinct failures: one entry per category, mutation (and variant), status and content type, and, for a
 * 5xx, a bypass or a leak, per route too (the others are usually the edge's, whatever the route).
 */
export function distinctFailures(report: FuzzReport) {
  const groups = new Map<
    string,
    { example: Outcome; count: number; callers: Set<string>; routes: Set<string> }
  >();
  for (const f of report.failures) {
    const perRoute = ["5xx", "auth-bypass", "leak", "contract"].includes(f.failure as Category);
    const key =
      `${f.failure} ${f.request.mutation}:${f.request.variant} ${f.answer.status} ${f.answer.contentType.split(";")[0]}` +
      (perRoute ? ` ${f.request.target}` : "");
    const g = groups.get(key) ?? {
      example: f,
      count: 0,
      callers: new Set<string>(),
      routes: new Set<string>(),
    };
    g.count++;
    g.callers.add(f.request.caller);
    g.routes.add(f.request.target);
    groups.set(key, g);
  }
  return [...groups.values()].sort(
    (a, b) =>
      CATEGORIES.indexOf(a.example.failure as Category) - CATEGORIES.indexOf(b.example.failure as Category) ||
      b.count - a.count,
  );
}

export function formatReport(report: FuzzReport, maxFailures = 60): string {
  const table = (title: string, counts: Record<string, number>) =>
    `${title}\n${Object.entries(counts)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `  ${k.padEnd(48)}${String(n).padStart(8)}`)
      .join("\n")}`;
  const out = [
    `fuzz: seed ${report.seed}: ${report.sent} requests in ${report.seconds.toFixed(1)} s ` +
      `(${(report.sent / Math.max(report.seconds, 0.001)).toFixed(0)}/s)` +
      (report.notSent > 0 ? `, ${report.notSent} the HTTP client refused to send` : ""),
    `routes: ${report.routes.operator} operator (${report.routes.operator - report.routes.unserved} served, ` +
      `${report.routes.unserved} answering 503 until their service serves them), ${report.routes.public} public`,
    table("by status", report.byStatus),
    table("by route group", report.byGroup),
    table("by caller", report.byCaller),
    table("2xx answers of operator routes, by caller", report.successByCaller),
    `served operator routes never answered 2xx: ${report.servedWithout2xx.length === 0 ? "none" : report.servedWithout2xx.join(", ")}`,
    table("by mutation", report.byMutation),
    `latency: p50 ${report.latency.p50} ms, p95 ${report.latency.p95} ms, p99 ${report.latency.p99} ms, max ${report.latency.max} ms`,
    ...report.slowest.map(
      (x, i) => `slowest ${i + 1}: ${x.answer.ms} ms → ${x.answer.status}: ${describeRequest(x.request)}`,
    ),
    `documented 503 (routes no service serves yet): ${report.documented503}`,
    `5xx other than those: ${report.counts["5xx"]}   hangs over 5 s: ${report.counts.hang}   ` +
      `closed without an answer: ${report.counts["no-answer"]}   authorisation bypasses: ${report.counts["auth-bypass"]}   ` +
      `broken route contracts: ${report.counts.contract}`,
    `error answers that are not problem documents: ${report.counts["not-problem"]}   ` +
      `errors showing internals: ${report.counts.leak}   JSON answers that do not parse: ${report.counts["bad-json-answer"]}`,
  ];
  const distinct = distinctFailures(report);
  for (const g of distinct.slice(0, maxFailures)) {
    const x = g.example;
    out.push(
      `FAIL ${x.failure} ×${g.count} on ${g.routes.size} route(s), ${g.callers.size} caller kind(s): ` +
        `${describeRequest(x.request)} → ${x.answer.status} ${x.answer.contentType || "(no content type)"} ${excerpt(x.answer.body, 200)}`,
    );
  }
  if (distinct.length > maxFailures)
    out.push(`… and ${distinct.length - maxFailures} more distinct failures`);
  out.push(
    report.failures.length === 0
      ? "fuzz: passed"
      : `fuzz: FAILED (${report.failures.length} requests, ${distinct.length} distinct)`,
  );
  return out.join("\n");
}
