/**
 * The public surface (docs/operator-guide.md "Public routes"):
 * - `GET /surface/render`: host (X-Forwarded-Host first) and path (X-Forwarded-Uri, else `/`) resolve the
 *   workspace; 404 when none; an Authenticated workspace and an anonymous caller: 302 to
 *   `/login?workspaceKey=…&returnUrl=…` (returnUrl: the path, only ever a same-origin path); else the
 *   plugin registry renders the chain's entry template, and the shell is served when there is none or it
 *   fails (200). Rendered pages are cached per host and path until the next change broadcast.
 * - the static shells `/surface-app/*` (the single-page-app shell) and `/admin/*` (a placeholder), with
 *   their index for any path that is not a file;
 * - the redirects `/login`, `/` and every other GET of a path that is not a file: to the workspace shell
 *   when the host (and path) resolve a workspace, else to the admin shell (`/`, `/login`) or `/404`.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

import type { Bus } from "@svc/bus";
import {
  messageClient,
  pluginRegistryBroadcasts,
  pluginRegistryMessages,
  type PublicWorkspace,
  type RenderedSurface,
  resolverBroadcasts,
  resolverMessages,
} from "@svc/contracts";
import { SvcError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import { normalisePath } from "@svc/workspace";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";

import { type CacheLimits, followedCache } from "../resolve-cache.js";
import { contentTypeOf, etagOf, notModified } from "../static-files.js";
import {
  firstHeader,
  originFor,
  type PublicIdentity,
  type PublicWorkspaces,
  requestHost,
} from "./public-routes.js";

/** How long a render that fell back to the shell is cached (at most the cache's TTL). */
const FALLBACK_FRESH_MS = 1_000;

/** The shells' files: next to the bundle (dist/static) or in the sources (services/gateway/static). */
function staticRoot(): string {
  for (const candidate of [
    new URL("./static/", import.meta.url),
    new URL("../../static/", import.meta.url),
  ]) {
    const path = fileURLToPath(candidate);
    if (existsSync(`${path}surface-app/index.html`)) return path;
  }
  throw new Error("the gateway's static files (surface-app/, admin/) were not found");
}

interface ShellFile {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
  readonly cacheControl: string;
}

/**
 * The files of a shell directory (`surface-app`, `admin`), read once at start and answered from memory by
 * their exact URL path (a directory's `index.html` also at the directory's path): no path a request names
 * ever reaches the file system. A few KB each; a static-file server would keep more than that in code and
 * tables (a glob library, the MIME database: about 2.5 MB of the idle gateway's memory).
 */
function shellFiles(root: string, dir: "surface-app" | "admin"): Map<string, ShellFile> {
  const files = new Map<string, ShellFile>();
  const base = join(root, dir);
  for (const entry of readdirSync(base, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = relative(base, join(entry.parentPath, entry.name)).split(sep).join("/");
    // Dotfiles, and files in dot-directories, are not served.
    if (path.split("/").some((segment) => segment.startsWith("."))) continue;
    const body = readFileSync(join(base, path));
    const file: ShellFile = {
      body,
      type: contentTypeOf(path),
      etag: etagOf(body),
      cacheControl: path.endsWith(".html") ? "no-cache" : "public, max-age=300",
    };
    files.set(`/${dir}/${path}`, file);
    if (path === "index.html" || path.endsWith("/index.html"))
      files.set(`/${dir}/${path.slice(0, -"index.html".length)}`, file);
  }
  return files;
}

/** Paths the surface never takes over: the APIs, probes and assets answer their own 404s. */
const RESERVED =
  /^\/(api|workspace|surface|plugin-assets|manifests|schemas|\.well-known|openapi\.json|health|ready|metrics)(\/|$)/;
/** A path whose last segment has no extension (not a file). */
const NON_FILE = (path: string) => !/\.[A-Za-z0-9]{1,8}$/.test(path.split("/").pop() ?? "");

/** A same-origin path to return to, or `/`: never another origin (no `//host`, no scheme, no backslash). */
export function safeReturnPath(raw: string | undefined): string {
  if (raw === undefined || !raw.startsWith("/") || raw.startsWith("//") || raw.includes("\\")) return "/";
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f]/.test(raw)) return "/";
  return raw.slice(0, 2_000);
}

export interface SurfaceOptions {
  readonly bus: Bus;
  readonly identity: PublicIdentity;
  readonly workspaces: PublicWorkspaces;
  readonly cache: CacheLimits;
  readonly log: Logger;
}

/**
 * The surface, the admin console's shell and the 404 page, in a context of its own (its static roots and
 * hooks stay there); what no route answers falls back to it through the problems plugin's list.
 */
export const surfacePlugin = fp<SurfaceOptions>(registerSurface, {
  name: "svc-surface",
  fastify: "5.x",
  encapsulate: true,
  dependencies: ["svc-problems"],
  decorators: { fastify: ["addNotFoundFallback"] },
});

async function registerSurface(app: FastifyInstance, options: SurfaceOptions): Promise<void> {
  const { bus, identity, workspaces } = options;
  const root = staticRoot();
  const shells = new Map([...shellFiles(root, "surface-app"), ...shellFiles(root, "admin")]);
  const shellHtml = (shells.get("/surface-app/") as ShellFile).body;
  const adminHtml = (shells.get("/admin/") as ShellFile).body;
  const notFoundHtml = readFileSync(`${root}404.html`);
  const resolver = messageClient(bus, resolverMessages);
  const registry = messageClient(bus, pluginRegistryMessages);
  const pages = followedCache(
    bus,
    [resolverBroadcasts["cache.invalidate"], pluginRegistryBroadcasts["contributions.changed"]],
    // Rendered pages are never served stale.
    { ttlMs: options.cache.ttlMs, size: options.cache.size },
  );
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();

  // The shells' files; a path that is none of them falls through to the not-found handling below (the
  // shell's index for a page path, else a 404).
  const serveShellFile = async (request: FastifyRequest, reply: FastifyReply) => {
    const file = shells.get(request.url.split("?")[0] as string);
    if (file === undefined) return reply.callNotFound();
    void reply.header("etag", file.etag).header("cache-control", file.cacheControl);
    if (notModified(request.headers, file.etag)) return reply.code(304).send();
    return reply.type(file.type).send(file.body);
  };
  app.get("/surface-app/*", serveShellFile);
  app.get("/admin/*", serveShellFile);

  const html = (reply: FastifyReply, body: Buffer | string, status = 200) =>
    reply.code(status).type("text/html; charset=utf-8").header("cache-control", "no-store").send(body);
  const resolve = (request: FastifyRequest, host: string, path: string) =>
    workspaces.byHost(host, path, request.id);

  app.get("/surface/render", async (request, reply) => {
    const host = requestHost(request);
    const forwardedUri = firstHeader(request.headers["x-forwarded-uri"]);
    const path = normalisePath(forwardedUri ?? "/");
    const ws = host === null ? null : await resolve(request, host, path);
    if (ws === null || host === null) {
      return html(reply, notFoundHtml, 404);
    }
    if (ws.accessPolicy === "Authenticated" && !(await identity.signedIn(request, ws.workspace.key))) {
      const returnUrl = safeReturnPath(forwardedUri ?? "/");
      const location = `/login?workspaceKey=${encodeURIComponent(ws.workspace.key)}&returnUrl=${encodeURIComponent(returnUrl)}`;
      return reply.code(302).header("location", location).header("cache-control", "no-store").send();
    }
    const origin = originFor(request, host);
    const prefix = ws.route.publicPathPrefix;
    const publicBaseUrl = ws.route.publicBaseUrl ?? `${origin}${prefix === "/" ? "" : prefix}`;
    // Signed-in callers of an Authenticated workspace get their own render (never a cached page).
    const cacheable = ws.accessPolicy === "Public";
    let fellBack: Uint8Array | undefined;
    const render = async () => {
      const data = await resolver.request(
        "surface.data",
        { workspaceKey: ws.workspace.key, pathPrefix: prefix },
        { requestId: request.id },
      );
      const rendered = await registry.request(
        "surface.render",
        { workspace: ws, publicBaseUrl, path, data },
        { requestId: request.id },
      );
      const bytes = encoder.encode(JSON.stringify(rendered));
      if (rendered.html === null && rendered.reason !== "no-chain") fellBack = bytes;
      return bytes;
    };
    const warnShell = (cause: string) =>
      options.log.warn(
        { workspaceKey: ws.workspace.key, cause, requestId: request.id },
        "the surface could not be rendered; the shell is served instead",
      );
    let rendered: RenderedSurface;
    try {
      // A page that fell back to the shell (a template error, a render cut off by its budget) is kept
      // for a second, not the whole TTL: long enough that a looping template does not take a render worker
      // per request, short enough that a slow first render is not what every visitor sees for long.
      const bytes = cacheable
        ? await pages.load(`${origin}\n${path}`, render, (value) =>
            value === fellBack ? FALLBACK_FRESH_MS : Number.POSITIVE_INFINITY,
          )
        : await render();
      rendered = JSON.parse(decoder.decode(bytes)) as RenderedSurface;
    } catch (error) {
      // Whatever keeps the chain or its template from rendering (the renderer down or slow, an error
      // answer, bad data), the surface stays up: the shell, and a warning naming the workspace and the
      // cause.
      warnShell(error instanceof SvcError ? `${error.code}: ${error.message}` : (error as Error).message);
      return html(reply, shellHtml);
    }
    if (rendered.html === null && rendered.reason !== "no-chain") {
      // A chain whose primary has no entry template, or a template error (the registry logs its message).
      warnShell(rendered.reason);
    }
    return html(reply, rendered.html ?? shellHtml);
  });

  const redirect = (reply: FastifyReply, location: string) =>
    reply.code(302).header("location", location).header("cache-control", "no-store").send();

  /**
   * The workspace of the visible `workspaceKey` query value (given but blank: `default`), or, without one,
   * of this host (and path).
   */
  async function workspaceFor(request: FastifyRequest, path: string): Promise<PublicWorkspace | null> {
    const host = requestHost(request);
    const named = (request.query as Record<string, unknown> | undefined)?.workspaceKey;
    if (typeof named === "string") return workspaces.byKey(named.trim() || "default", request.id);
    return host === null ? null : resolve(request, host, path);
  }

  app.get("/login", async (request, reply) => {
    const returnUrl = safeReturnPath(
      (request.query as Record<string, unknown>).returnUrl as string | undefined,
    );
    const ws = await workspaceFor(request, returnUrl);
    if (ws === null) return redirect(reply, `/admin/login?returnUrl=${encodeURIComponent(returnUrl)}`);
    return redirect(
      reply,
      `/surface-app/login?workspaceKey=${encodeURIComponent(ws.workspace.key)}&returnUrl=${encodeURIComponent(returnUrl)}`,
    );
  });

  app.get("/", async (request, reply) => {
    const ws = await workspaceFor(request, "/");
    return redirect(reply, ws === null ? "/admin/" : "/surface-app/?path=%2F");
  });

  app.get("/404", async (_request, reply) => html(reply, notFoundHtml, 404));

  // Asked before a 404: a redirect or a shell page for a GET of a non-file path.
  app.addNotFoundFallback(async (request, reply) => {
    if (request.method !== "GET" && request.method !== "HEAD") return undefined;
    const path = normalisePath(request.url.split("?")[0]);
    if (path === "/admin" || path === "/surface-app") return redirect(reply, `${path}/`);
    // The shells' own paths: their index for any page that is not a file.
    if (path.startsWith("/surface-app/") && NON_FILE(path)) return html(reply, shellHtml);
    if (path.startsWith("/admin/") && NON_FILE(path)) return html(reply, adminHtml);
    if (RESERVED.test(path) || !NON_FILE(path)) return undefined;
    const ws = await workspaceFor(request, path);
    return redirect(reply, ws === null ? "/404" : `/surface-app/?path=${encodeURIComponent(path)}`);
  });
}
