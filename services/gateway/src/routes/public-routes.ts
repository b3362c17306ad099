/**
 * The public workspace routes besides `resolve`: `context`, `bootstrap.js`,
 * `ui-chain`, `theme` and `navigation`. Each resolves a visible workspace (the resolver, cached here by
 * host and path or by key) and, for the chain and theme, asks the plugin registry (cached by workspace).
 * The caches drop everything on the resolver's and the registry's change broadcasts.
 *
 * An Authenticated workspace is not shown to anonymous callers: `ui-chain` and `navigation` answer them
 * the very 404 (status, headers, body) that a workspace that does not exist gets, so nothing can be
 * enumerated; `theme` answers its empty theme. A caller is signed in for such a workspace when it sends a
 * platform session or a session of that very workspace (`PublicIdentity`).
 */
import type { Bus } from "@svc/bus";
import {
  type MessageClient,
  messageClient,
  type NavigationView,
  pluginRegistryBroadcasts,
  pluginRegistryMessages,
  type PublicTheme,
  type PublicWorkspace,
  resolverBroadcasts,
  resolverMessages,
} from "@svc/contracts";
import { normaliseHost, normalisePath } from "@svc/workspace";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

import { type CacheLimits, followedCache, type ResolveCache } from "../resolve-cache.js";

/** Whether the request carries a valid session (set by the operator API once its authenticator runs). */
export interface PublicIdentity {
  /**
   * Whether the caller holds a session that may see this workspace when its access policy is
   * `Authenticated`: a platform session, or a workspace session of this very workspace. A
   * session of another workspace, or one without a scope claim, is anonymous here.
   */
  signedIn: (request: FastifyRequest, workspaceKey: string) => Promise<boolean>;
}

const JSON_TYPE = "application/json; charset=utf-8";
const decoder = new TextDecoder();

/** Freezes a parsed JSON value and everything in it: one parse is shared by every request it answers. */
function frozen<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) frozen(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * Each cached answer's bytes parsed once: a cache hit returns the very bytes it stored, and a refreshed
 * or dropped entry new ones, so a parse is never served for bytes it was not made from. Frozen, shared.
 */
const parsedAnswers = new WeakMap<Uint8Array, unknown>();
function parsedOnce<T>(bytes: Uint8Array): T {
  if (parsedAnswers.has(bytes)) return parsedAnswers.get(bytes) as T;
  const value = frozen(JSON.parse(decoder.decode(bytes)) as T);
  parsedAnswers.set(bytes, value);
  return value;
}

/** A header's first value. */
export function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The host a request names (`X-Forwarded-Host` first, else `Host`), normalised; null when unusable. */
export function requestHost(request: FastifyRequest): string | null {
  return normaliseHost(firstHeader(request.headers["x-forwarded-host"]) ?? request.headers.host);
}

/**
 * The visible workspaces as the resolver answers them (`resolver.workspace.public`), by host and path or
 * by key; cached (with the stale window for outages) and dropped on the resolver's change broadcasts. The
 * public routes and the surface share one.
 */
export class PublicWorkspaces {
  private readonly cache: ResolveCache;
  private readonly resolver: MessageClient<typeof resolverMessages>;

  constructor(bus: Bus, options: CacheLimits) {
    this.resolver = messageClient(bus, resolverMessages);
    this.cache = followedCache(bus, [resolverBroadcasts["cache.invalidate"]], options);
  }

  async byHost(host: string, path: string, requestId: string): Promise<PublicWorkspace | null> {
    const bytes = await this.cache.load(`h\n${host}\n${path}`, () =>
      this.resolver.requestRaw("workspace.public", { host, path }, { requestId }),
    );
    return parsedOnce<PublicWorkspace | null>(bytes);
  }

  async byKey(workspaceKey: string, requestId: string): Promise<PublicWorkspace | null> {
    const bytes = await this.cache.load(`k\n${workspaceKey}`, () =>
      this.resolver.requestRaw("workspace.public", { workspaceKey }, { requestId }),
    );
    return parsedOnce<PublicWorkspace | null>(bytes);
  }
}

/** `workspaceKey` of the query: absent or blank means `default`. */
function workspaceKeyOf(query: unknown): string {
  const raw = (query as Record<string, unknown> | undefined)?.workspaceKey;
  const value: unknown = Array.isArray(raw) ? (raw as unknown[])[0] : raw;
  return typeof value === "string" && value.trim() !== "" ? value.trim() : "default";
}

function queryValue(query: unknown, name: string): string | undefined {
  const raw = (query as Record<string, unknown> | undefined)?.[name];
  const value: unknown = Array.isArray(raw) ? (raw as unknown[])[0] : raw;
  return typeof value === "string" ? value : undefined;
}

/** The same 404 for a workspace that is not there and one that is not shown to this caller. */
const HIDDEN = JSON.stringify({
  type: "/problems/not-found",
  title: "Not Found",
  status: 404,
  detail: "Workspace not found.",
  code: "SVC_NOT_FOUND",
});
function hidden(reply: FastifyReply) {
  return reply
    .code(404)
    .header("content-type", "application/problem+json; charset=utf-8")
    .header("cache-control", "no-store")
    .send(HIDDEN);
}

/**
 * The origin the caller used: scheme from `X-Forwarded-Proto` (http or https) or the connection, host and
 * port as `X-Forwarded-Host` or `Host` gave them (when well formed; else the resolved host alone).
 */
export function originFor(request: FastifyRequest, resolvedHost: string): string {
  const proto = firstHeader(request.headers["x-forwarded-proto"])?.split(",")[0]?.trim().toLowerCase();
  const scheme = proto === "https" || proto === "http" ? proto : request.protocol;
  const raw =
    (firstHeader(request.headers["x-forwarded-host"]) ?? request.headers.host ?? "")
      .split(",")[0]
      ?.trim()
      .toLowerCase() ?? "";
  const port = /^(?:[a-z0-9_.-]+|\[[0-9a-f:.]+\]):(\d{1,5})$/.exec(raw)?.[1];
  const host =
    resolvedHost.includes(":") && !resolvedHost.startsWith("[") ? `[${resolvedHost}]` : resolvedHost;
  return `${scheme}://${host}${port === undefined ? "" : `:${port}`}`;
}

/** JSON for a `<script>`: nothing in a value can close the element or start markup. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replaceAll("<", "\\u003c")
    .replaceAll(">", "\\u003e")
    .replaceAll("&", "\\u0026")
    .replaceAll("\u2028", "\\u2028")
    .replaceAll("\u2029", "\\u2029");
}

export function registerPublicRoutes(
  app: FastifyInstance,
  bus: Bus,
  identity: PublicIdentity,
  workspaces: PublicWorkspaces,
  cacheOptions: CacheLimits,
): void {
  const resolver = messageClient(bus, resolverMessages);
  const registry = messageClient(bus, pluginRegistryMessages);
  const plugins = followedCache(
    bus,
    [resolverBroadcasts["cache.invalidate"], pluginRegistryBroadcasts["contributions.changed"]],
    cacheOptions,
  );
  const navigations = followedCache(bus, [resolverBroadcasts["cache.invalidate"]], cacheOptions);
  async function chainAndTheme(workspaceKey: string, requestId: string) {
    const bytes = await plugins.load(workspaceKey, () =>
      registry.requestRaw("workspace.public", { workspaceKey }, { requestId }),
    );
    return parsedOnce<{ chain: string[]; theme: PublicTheme }>(bytes);
  }
  /** The visible workspace, unless it is Authenticated and the caller is anonymous. */
  async function shown(request: FastifyRequest, workspaceKey: string): Promise<PublicWorkspace | null> {
    const ws = await workspaces.byKey(workspaceKey, request.id);
    if (ws === null) return null;
    if (ws.accessPolicy === "Authenticated" && !(await identity.signedIn(request, ws.workspace.key))) {
      return null;
    }
    return ws;
  }
  /** The context answers made per visible workspace (a parsed cache entry), by the origin it was reached by. */
  const MAX_ORIGINS_KEPT = 8; // the origin comes from request headers: a bounded few kept per workspace
  const contextAnswers = new WeakMap<PublicWorkspace, Map<string, Buffer>>();
  const routeInfo = (origin: string, host: string, ws: PublicWorkspace) => {
    const prefix = ws.route.publicPathPrefix;
    return {
      publicBaseUrl: ws.route.publicBaseUrl ?? `${origin}${prefix === "/" ? "" : prefix}`,
      publicHost: host,
      publicPathPrefix: prefix,
    };
  };

  app.get("/workspace/public/context", async (request, reply) => {
    void reply.header("cache-control", "no-store");
    const host = requestHost(request);
    const path = normalisePath(
      firstHeader(request.headers["x-forwarded-uri"]) ?? queryValue(request.query, "path") ?? "/",
    );
    const ws = host === null ? null : await workspaces.byHost(host, path, request.id);
    if (ws === null || host === null) return hidden(reply);
    // The answer is the workspace and where it was reached: serialised once per origin it is reached by.
    const origin = originFor(request, host);
    let answers = contextAnswers.get(ws);
    if (answers === undefined) contextAnswers.set(ws, (answers = new Map<string, Buffer>()));
    let body = answers.get(origin);
    if (body === undefined) {
      body = Buffer.from(JSON.stringify({ workspace: ws.workspace, route: routeInfo(origin, host, ws) }));
      if (answers.size < MAX_ORIGINS_KEPT) answers.set(origin, body);
    }
    return reply.type(JSON_TYPE).send(body);
  });

  app.get("/workspace/public/bootstrap.js", async (request, reply) => {
    const host = requestHost(request);
    let rawPath = queryValue(request.query, "path");
    if (rawPath === undefined) {
      const referer = firstHeader(request.headers.referer);
      try {
        rawPath = referer === undefined ? undefined : new URL(referer).pathname;
      } catch {
        rawPath = undefined;
      }
    }
    const path = normalisePath(rawPath ?? "/");
    const ws = host === null ? null : await workspaces.byHost(host, path, request.id);
    const origin = originFor(request, host ?? "localhost");
    const context =
      ws === null || host === null
        ? {
            workspace: { key: "default", name: "Workspace", type: "base" },
            route: { publicBaseUrl: `${origin}/surface-app/`, publicPathPrefix: path },
          }
        : (() => {
            const info = routeInfo(origin, host, ws);
            return {
              workspace: ws.workspace,
              route: { publicBaseUrl: info.publicBaseUrl, publicPathPrefix: info.publicPathPrefix },
            };
          })();
    return reply
      .header("content-type", "application/javascript; charset=utf-8")
      .header("cache-control", "no-store, no-cache, must-revalidate")
      .send(`window.__SVC_WORKSPACE_CONTEXT__ = ${scriptJson(context)};\n`);
  });

  app.get("/workspace/public/ui-chain", async (request, reply) => {
    const workspaceKey = workspaceKeyOf(request.query);
    const ws = await shown(request, workspaceKey);
    if (ws === null) return hidden(reply);
    const { chain } = await chainAndTheme(ws.workspace.key, request.id);
    return reply
      .type(JSON_TYPE)
      .header("cache-control", "no-store")
      .send({ workspaceKey: ws.workspace.key, chain });
  });

  app.get("/workspace/public/theme", async (request, reply) => {
    const workspaceKey = workspaceKeyOf(request.query);
    const ws = await shown(request, workspaceKey);
    void reply.type(JSON_TYPE).header("cache-control", "no-store");
    if (ws === null) {
      return reply.send({
        workspaceKey,
        themePluginId: null,
        themeVersion: null,
        valuesByKey: {},
        sectionLayouts: [],
      } satisfies PublicTheme);
    }
    return reply.send((await chainAndTheme(ws.workspace.key, request.id)).theme);
  });

  /**
   * Navigation: the workspace named by `workspaceKey` (blank: `default`), or, without the parameter, resolved from host and path (X-Forwarded-Uri,
   * then `path`, then `/`); `surfaceKey` (default `default`); `parentKey` lists that item's children
   * instead of the root's. Full paths start with the prefix the workspace was reached under.
   */
  app.get("/workspace/public/navigation", async (request, reply) => {
    const named = queryValue(request.query, "workspaceKey")?.trim();
    const surfaceKey = queryValue(request.query, "surfaceKey")?.trim() || "default";
    const parentKey = queryValue(request.query, "parentKey")?.trim() || undefined;
    let ws: PublicWorkspace | null;
    if (named !== undefined) {
      // Given but blank: `default`. Absent: the host and path decide.
      ws = await shown(request, named || "default");
    } else {
      const host = requestHost(request);
      const path = normalisePath(
        firstHeader(request.headers["x-forwarded-uri"]) ?? queryValue(request.query, "path") ?? "/",
      );
      ws = host === null ? null : await workspaces.byHost(host, path, request.id);
      if (ws?.accessPolicy === "Authenticated" && !(await identity.signedIn(request, ws.workspace.key))) {
        ws = null;
      }
    }
    if (ws === null || surfaceKey.length > 63 || (parentKey?.length ?? 0) > 100) return hidden(reply);
    const workspaceKey = ws.workspace.key;
    const pathPrefix = ws.route.publicPathPrefix;
    const bytes = await navigations.load(
      `${workspaceKey}\n${surfaceKey}\n${parentKey ?? ""}\n${pathPrefix}`,
      () =>
        resolver.requestRaw(
          "navigation.get",
          { workspaceKey, surfaceKey, pathPrefix, ...(parentKey === undefined ? {} : { parentKey }) },
          { requestId: request.id },
        ),
    );
    // The resolver's answer is already the JSON to send: read only to tell a hidden one.
    if (parsedOnce<NavigationView | null>(bytes) === null) return hidden(reply);
    return reply
      .type(JSON_TYPE)
      .header("cache-control", "no-store")
      .send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  });
}
