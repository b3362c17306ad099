/**
 * The kinds of caller every route is tried with, and the malformed credentials of the `bad-auth`
 * mutation. Each caller says which operator routes must refuse it (`denies`): a 2xx there is an
 * authorisation bypass, whatever else the run finds.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomUUID,
} from "node:crypto";

import { TOKEN_AUDIENCE } from "@svc/access";
import { SignJWT } from "jose";

import { signToken } from "../support/sign.js";

/** What the guard needs to know of an operator route. */
export interface RouteGuard {
  readonly permission: string | undefined;
  readonly alternatives: readonly string[];
  readonly platformOnly: boolean;
  /** Path parameters of the request (a workspace key outside the caller's reach must not answer 2xx). */
  readonly params: Readonly<Record<string, string>>;
}

export interface Caller {
  readonly name: string;
  readonly headers: Readonly<Record<string, string>>;
  /** True when this caller must not get a 2xx answer from the operator route described. */
  readonly denies: (route: RouteGuard) => boolean;
}

const denyAll = () => true;
const denyNone = () => false;

export interface CallerOptions {
  /** The signing key of the stack's rbac (PKCS#8 PEM or key object). */
  readonly signingKey: string | KeyObject;
  /** The break-glass key the gateway was configured with. */
  readonly apiKey: string;
  /** Every core permission key. */
  readonly allKeys: readonly string[];
  /** The workspace the workspace-scoped sessions belong to. */
  readonly workspaceKey: string;
}

/** Signs arbitrary claims (wrong types included) with `key`, as rbac would sign a real token. */
async function signClaims(
  key: KeyObject,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = { alg: "ES256", typ: "JWT" },
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    sub: randomUUID(),
    iss: "svc",
    aud: TOKEN_AUDIENCE,
    iat: now - 60,
    exp: now + 3_600,
    sid: randomUUID(),
    svc_scope: "platform",
    permission: ["*"],
    role: [],
    ...claims,
  })
    .setProtectedHeader(header as { alg: string })
    .sign(key);
}

const b64 = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");

export async function fuzzCallers(o: CallerOptions): Promise<{ callers: Caller[]; badAuth: Caller[] }> {
  const key = typeof o.signingKey === "string" ? createPrivateKey(o.signingKey) : o.signingKey;
  const bearer = async (claims: Parameters<typeof signToken>[1]) => ({
    authorization: `Bearer ${await signToken(key, claims)}`,
  });
  // Every other key: the workspace session holds some keys and lacks others.
  const someKeys = o.allKeys.filter((_k, i) => i % 2 === 0);
  const held = new Set(someKeys);
  const callers: Caller[] = [
    { name: "anonymous", headers: {}, denies: denyAll },
    { name: "garbage token", headers: { authorization: "Bearer not.a.token" }, denies: denyAll },
    {
      name: "expired token",
      headers: await bearer({ scope: "platform", roles: ["superadmin"], expiresIn: -120 }),
      denies: denyAll,
    },
    {
      name: "superadmin",
      headers: await bearer({ scope: "platform", roles: ["superadmin"] }),
      denies: denyNone,
    },
    {
      name: "platform, every key",
      headers: await bearer({ scope: "platform", permissions: [...o.allKeys] }),
      denies: denyNone,
    },
    { name: "platform, no keys", headers: await bearer({ scope: "platform" }), denies: denyAll },
    {
      name: "workspace, some keys",
      headers: await bearer({ scope: "workspace", workspaceKey: o.workspaceKey, permissions: someKeys }),
      denies: (r) =>
        r.platformOnly ||
        ![r.permission, ...r.alternatives].some((k) => k !== undefined && held.has(k)) ||
        (r.params.workspaceKey !== undefined && r.params.workspaceKey !== o.workspaceKey),
    },
    // What a session without a scope claim may reach is not pinned down here: no bypass is judged.
    { name: "no scope claim", headers: await bearer({ permissions: [...o.allKeys] }), denies: denyNone },
    // host.api has no grants unless an operator gives it some (which a fuzzed request may do).
    { name: "break-glass API key", headers: { "x-svc-api-key": o.apiKey }, denies: denyNone },
  ];

  const otherKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
  const valid = await signToken(key, { scope: "platform", roles: ["superadmin"] });
  const [head, payload] = valid.split(".") as [string, string];
  const now = Math.floor(Date.now() / 1000);
  const bad = (name: string, headers: Record<string, string>): Caller => ({ name, headers, denies: denyAll });
  const signed = async (name: string, claims: Record<string, unknown>, header?: Record<string, unknown>) =>
    bad(name, { authorization: `Bearer ${await signClaims(key, claims, header)}` });
  const badAuth: Caller[] = [
    bad("empty bearer", { authorization: "Bearer" }),
    bad("bearer and spaces", { authorization: "Bearer    " }),
    bad("basic scheme", { authorization: "Basic YWRtaW46YWRtaW4tZGV2LXBhc3N3b3Jk" }),
    bad("huge bearer", { authorization: `Bearer ${"a".repeat(12_000)}` }),
    bad("two tokens", { authorization: `Bearer ${valid} ${valid}` }),
    bad("alg none", { authorization: `Bearer ${b64({ alg: "none", typ: "JWT" })}.${payload}.` }),
    bad("alg HS256", { authorization: `Bearer ${b64({ alg: "HS256", typ: "JWT" })}.${payload}.${b64("x")}` }),
    bad("signature stripped", { authorization: `Bearer ${head}.${payload}.` }),
    bad("payload not JSON", { authorization: `Bearer ${head}.${b64("{not json")}.${b64("sig")}` }),
    bad("payload an array", { authorization: `Bearer ${head}.${b64([1, 2])}.${b64("sig")}` }),
    bad("four parts", { authorization: `Bearer ${valid}.${payload}` }),
    bad("header NUL", { authorization: `Bearer ${b64("\u0000")}.${payload}.x` }),
    bad("other signing key", {
      authorization: `Bearer ${await signToken(otherKey, { scope: "platform", roles: ["superadmin"] })}`,
    }),
    await signed("wrong audience", { aud: "someone-else" }),
    await signed("wrong issuer", { iss: "evil" }),
    await signed("not yet valid", { nbf: now + 3_600 }),
    await signed("exp a string", { exp: "tomorrow" }),
    await signed("exp missing", { exp: undefined }),
    bad("kid traversal, other key", {
      authorization: `Bearer ${await signClaims(otherKey, {}, { alg: "ES256", typ: "JWT", kid: "../../../../dev/null" })}`,
    }),
    bad("jku header, other key", {
      authorization: `Bearer ${await signClaims(otherKey, {}, { alg: "ES256", typ: "JWT", jku: "http://127.0.0.1:9/jwks" })}`,
    }),
    bad("embedded jwk, other key", {
      authorization: `Bearer ${await signClaims(
        otherKey,
        {},
        {
          alg: "ES256",
          typ: "JWT",
          jwk: createPublicKey(otherKey).export({ format: "jwk" }),
        },
      )}`,
    }),
    bad("api key wrong", { "x-svc-api-key": `${o.apiKey}x` }),
    bad("api key empty", { "x-svc-api-key": "" }),
    bad("api key huge", { "x-svc-api-key": "k".repeat(12_000) }),
    bad("api key prefix", { "x-svc-api-key": o.apiKey.slice(0, -1) }),
    bad("api key as bearer", { authorization: `Bearer ${o.apiKey}` }),
  ];
  // Tokens signed with the right key whose claims have unexpected types or values: the guard may accept
  // them, refuse them or treat them as holding nothing, but must never fail on them. No bypass is judged
  // (only rbac can sign them).
  const odd = async (name: string, claims: Record<string, unknown>, header?: Record<string, unknown>) => ({
    ...(await signed(name, claims, header)),
    denies: denyNone,
  });
  badAuth.push(
    await odd("exp huge", { exp: 1e308 }),
    await odd("iat in the future", { iat: now + 86_400 * 365 }),
    await odd("no sub", { sub: undefined }),
    await odd("sub a number", { sub: 42 }),
    await odd("sid null", { sid: null }),
    await odd("sid an object", { sid: { $ne: null } }),
    await odd("kid traversal", {}, { alg: "ES256", typ: "JWT", kid: "../../../../dev/null" }),
    await odd("jku header", {}, { alg: "ES256", typ: "JWT", jku: "http://127.0.0.1:9/jwks" }),
    await odd("permission a string", { permission: "*" }),
    await odd("permission numbers", { permission: [1, 2, null] }),
    await odd("role an object", { role: { superadmin: true } }),
    await odd("scope unknown", { svc_scope: "galaxy" }),
    await odd("scope a number", { svc_scope: 7 }),
    await odd("workspace_key a number", { svc_scope: "workspace", workspace_key: 5, permission: ["*"] }),
    await odd("workspace_key traversal", {
      svc_scope: "workspace",
      workspace_key: "../default",
      permission: ["*"],
    }),
    await odd("workspace scope, no key", { svc_scope: "workspace", permission: ["*"] }),
    await odd("1,000 permissions", {
      permission: Array.from({ length: 1_000 }, (_v, i) => `k${i}.read`),
    }),
  );
  return { callers, badAuth };
}

/** Values the generator uses for fields of these names: the demo stack's (scripts/lib/stack.ts). */
export function demoConstants(demo: {
  workspaceKey: string;
  tenantKey: string;
  adminUserName: string;
  adminPassword: string;
}): Record<string, string[]> {
  return {
    workspaceKey: [demo.workspaceKey],
    tenantKey: [demo.tenantKey],
    tenantId: [demo.tenantKey],
    role: ["superadmin", "admin", "host.api"],
    username: [demo.adminUserName],
    password: [demo.adminPassword],
  };
}
