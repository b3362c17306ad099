/**
 * One typed contract per operator route: method, path, permission, the owning service's subject and the
 * TypeBox schemas of params, query, body and reply. The gateway builds its routes, guard and OpenAPI
 * description from the contracts; the owning service serves the route with `serveRoute`, which checks the
 * request against the same schemas (whatever the caller) and types the handler with `Static<>`.
 *
 * A contract's subject is `<service>.<name>`, built from the key it is declared under, so a service can
 * only serve a route that exists, and only with a handler whose request and reply match the schemas.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { type CorePermissionKey, isPlatformKey } from "@svc/access";
import type { RouteReply, RouteRequest } from "@svc/bus";

import { checker, requireValid, requireValidReply } from "./checks.js";

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

/** What a route declares; `defineRoutes` adds its service and subject. */
export interface RouteSpec {
  readonly method: HttpMethod;
  /** Fastify syntax: `/api/tenants/:tenantKey`. */
  readonly path: string;
  /**
   * The permission key. Two keys where the route belongs under both (members under membership.*
   * and workspace.*): either one passes, and a 403 names the first.
   */
  readonly permission: CorePermissionKey | readonly [CorePermissionKey, CorePermissionKey];
  /** User writes and the data export demand platform scope, even holding the key. */
  readonly platformOnly?: boolean;
  readonly summary: string;
  readonly params?: TSchema;
  readonly query?: TSchema;
  readonly body?: TSchema;
  /** The success reply's body. */
  readonly reply?: TSchema;
  /**
   * The request body is an uploaded archive (`application/gzip`, `application/zip`, `application/x-tar`
   * or `application/octet-stream`): the gateway stores its bytes in the package object store and forwards
   * `{ package: { sha256, size, contentType } }` (the `body` schema) instead. `"media"`: a
   * `multipart/form-data` upload of one file, stored in the media object store; the gateway forwards
   * `{ media: { objectName, size, contentType, fileName, sha256 } }`.
   */
  readonly upload?: boolean | "media";
  /**
   * The reply describes a stored file (`{ objectName, size, contentType, sha256, fileName }`): the gateway
   * streams the file's bytes from the media object store instead, with `ETag`, ranges and
   * `Content-Disposition`.
   */
  readonly download?: boolean;
  /**
   * The reply shows a secret once (a credential, a client secret): a write sent with an Idempotency-Key
   * keeps its status and location but not its body, in the gateway's key store and in the service's
   * outcomes, and a retry with the key answers 409 (`rule: "secret-shown-once"`).
   */
  readonly secretReply?: boolean;
}

type StaticOf<S, K extends string, Default> = S extends { readonly [P in K]: infer T extends TSchema }
  ? Static<T>
  : Default;

export type ParamsOf<S> = StaticOf<S, "params", Record<string, string>>;
export type QueryOf<S> = StaticOf<S, "query", Record<string, unknown>>;
export type BodyOf<S> = StaticOf<S, "body", unknown>;
export type ReplyBodyOf<S> = StaticOf<S, "reply", unknown>;

/** The request a route's handler receives: the caller's principal and the checked params, query and body. */
export type RequestOfRoute<S> = RouteRequest<ParamsOf<S>, QueryOf<S>, BodyOf<S>>;
/** What a route's handler answers; errors are thrown as SvcErrors. */
export type ReplyOfRoute<S> = RouteReply<ReplyBodyOf<S>>;

/** A route as declared and bound to its owner: the subject is `<service>.<name>`. */
export type RouteContract<S extends RouteSpec = RouteSpec, Subject extends string = string> = S & {
  readonly service: string;
  readonly subject: Subject;
  /** Checks a forwarded request against the route's schemas: a ValidationError lists each violation. */
  readonly decode: (payload: unknown) => RequestOfRoute<S>;
  /** Checks a reply against the reply schema (development and tests): an InternalError on a mismatch. */
  readonly checkReply: (reply: RouteReply<unknown>) => void;
};

const PrincipalSchema = Type.Object({
  subject: Type.String(),
  scope: Type.Union([Type.Literal("platform"), Type.Literal("workspace"), Type.Null()]),
  workspaceKey: Type.Union([Type.String(), Type.Null()]),
  permissions: Type.Array(Type.String()),
  roles: Type.Array(Type.String()),
});

const AnyRecord = Type.Record(Type.String(), Type.Unknown());

function bind<S extends RouteSpec, Subject extends string>(
  service: string,
  subject: Subject,
  spec: S,
): RouteContract<S, Subject> {
  const checkRequest = checker(
    Type.Object({
      principal: PrincipalSchema,
      params: spec.params ?? AnyRecord,
      query: spec.query ?? AnyRecord,
      body: spec.body ?? Type.Unknown(),
    }),
  );
  const checkReply = spec.reply === undefined ? undefined : checker(spec.reply);
  const keys: readonly string[] = typeof spec.permission === "string" ? [spec.permission] : spec.permission;
  return {
    ...spec,
    // A route whose keys are all platform keys is platform-only: one table decides
    // both this and which keys a workspace session carries.
    platformOnly: spec.platformOnly ?? keys.every((k) => isPlatformKey(k)),
    service,
    subject,
    decode(payload) {
      requireValid(checkRequest, payload);
      return payload as RequestOfRoute<S>;
    },
    checkReply(reply) {
      if (checkReply === undefined || reply.status >= 300 || reply.body === undefined) return;
      requireValidReply(checkReply, subject, reply.body);
    },
  };
}

/** The `:name` segments of a Fastify path, as a union of names. */
export type PathParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | PathParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never;

type ParamsSchemaNames<S> = S extends { readonly params: infer T extends TSchema } ? keyof Static<T> : never;

/** The `:name`s of a spec's path that its params schema does not declare. */
type MissingParams<S> = S extends { readonly path: infer P extends string }
  ? Exclude<PathParamNames<P>, ParamsSchemaNames<S>>
  : never;

/**
 * Each spec whose path names a `:param` missing from its params schema must carry a property it cannot
 * have: a compile error at the route, naming the parameter.
 */
type ParamsDeclared<Specs> = {
  readonly [K in keyof Specs]: [MissingParams<Specs[K]>] extends [never]
    ? unknown
    : { readonly "path parameters missing from the params schema": MissingParams<Specs[K]> };
};

/**
 * Declares the routes a service owns. Each key becomes the route's name and its subject
 * `<service>.<key>`: `defineRoutes("rbac", { "users.list": {...} })["users.list"].subject` is
 * `"rbac.users.list"`, as a type too. A `:param` of a path that its params schema does not declare does
 * not compile.
 */
export function defineRoutes<const Service extends string, const Specs extends Record<string, RouteSpec>>(
  service: Service,
  specs: Specs & ParamsDeclared<Specs>,
): { readonly [K in keyof Specs & string]: RouteContract<Specs[K], `${Service}.${K}`> } {
  const out: Record<string, RouteContract> = {};
  for (const [name, spec] of Object.entries(specs)) out[name] = bind(service, `${service}.${name}`, spec);
  return out as { readonly [K in keyof Specs & string]: RouteContract<Specs[K], `${Service}.${K}`> };
}
